#pragma once
// Gate 6: the evaluation child, correctness only, on small shapes, under compute-sanitizer —
// memcheck, racecheck, initcheck, synccheck, one tool per child process so that an error names its
// tool. For candidates about to enter the elites (it is slow). The tools' processes run at once
// (nothing is timed under them, and each spends most of its time starting up), at most
// sanitizer_jobs() together; the verdict is the first failure in the tools' order either way.
#include <string>
#include <vector>

#include "eval_request.h"
#include "evo/evo.pb.h"

namespace evo::cuda {

inline constexpr int kSanitizerErrorExit = 86;

// $EVO_COMPUTE_SANITIZER, else compute-sanitizer on PATH, else $CUDA_HOME/bin (default
// /usr/local/cuda/bin); empty when none is executable.
std::string find_compute_sanitizer();

// The tools, in the order their verdicts are read.
const std::vector<std::string>& sanitizer_tools();

// How many tools' processes may run at once: $EVO_SANITIZER_JOBS (1: one after another, for a
// GPU short of memory), else every tool at once. Throws std::runtime_error (one line) when the
// variable is set but not a whole number from 1; the cuda evaluator asks once at start.
int sanitizer_jobs();

// The first error line of a compute-sanitizer log, without its "========= " prefix
// ("Invalid __global__ write of size 2 bytes"), with a race's second access ("... and Write
// access at ...") where racecheck names it on the next line; empty when there is none.
std::string first_sanitizer_error(const std::string& log);

struct SanitizerVerdict {
  v1::GateVerdict gate;   // gate "sanitizer": passed / failed / skipped
  bool failed = false;
  std::string message;    // one line for Evaluation.message when failed
};

// req holds the small shapes' jobs (run_correct only). exe dispatches `__child`.
SanitizerVerdict run_sanitizer_gate(const std::string& sanitizer, const std::string& exe,
                                    const EvalRequest& req, const std::string& work_dir,
                                    int timeout_ms);

}  // namespace evo::cuda
