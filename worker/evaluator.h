#pragma once
// evaluate(genome, problems) -> Evaluation: the worker's one job. Backends:
//   cuda  - compile with NVRTC, then gates in a watchdogged child process on the GPU
//   model - compile with NVRTC, resource gates, then an analytical estimate (marked estimated)
#include <memory>
#include <string>
#include <vector>

#include "evo/evo.pb.h"
#include "genome.h"
#include "problem.h"

namespace evo {

struct EvaluatorOptions {
  std::string backend = "cuda";      // cuda | model
  int gpu = 0;
  std::string arch;                  // empty: from the device (cuda) or sm_90a (model)
  std::string cache_dir;             // empty: $EVO_CACHE_DIR or ~/.cache/evo
  int timeout_ms = 10000;            // watchdog per child evaluation
  bool sanitize = false;             // run the compute-sanitizer gate
  int compile_threads = 0;           // 0: hardware concurrency
  // cuda: a fresh gate process per evaluation instead of one serving child that keeps its CUDA
  // context between evaluations (cuda_evaluator.h); slower, for comparison and diagnosis.
  bool child_per_evaluation = false;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual const v1::DeviceInfo& device() const = 0;
  // Starts compiling in the background so that a later evaluate() finds the cubin ready: the GPU
  // must not wait on the compiler.
  virtual void prefetch(const Genome& g, const std::vector<Problem>& shapes) = 0;
  // Whether the compiles prefetch started for g are done (or failed), so that evaluate() would go
  // straight to the GPU: a daemon holding several leases measures a ready one rather than wait
  // behind a slow compile. True when nothing is in flight for g.
  virtual bool compiled(const Genome& g, const std::vector<Problem>& shapes) {
    (void)g;
    (void)shapes;
    return true;
  }
  // Never throws for a bad candidate: every failure is a status in the Evaluation.
  virtual v1::Evaluation evaluate(const Genome& g, const std::vector<Problem>& shapes,
                                  bool run_sanitizer) = 0;
};

// Throws std::runtime_error with one line for people, e.g. "no GPU found (CUDA driver version is
// insufficient); use --backend model".
std::unique_ptr<Evaluator> make_evaluator(const EvaluatorOptions& options);

}  // namespace evo
