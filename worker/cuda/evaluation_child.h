#pragma once
// The parent's side of one evaluation child: write the request, start `<exe> __child <request>`
// (optionally behind a wrapper such as compute-sanitizer) under the watchdog, and turn whatever
// happened into an Evaluation — the child's own result, or TIMEOUT / CRASH when it could not give
// one. Never throws for anything the child does.
#include <string>
#include <vector>

#include "child_process.h"
#include "eval_request.h"
#include "evo/evo.pb.h"

namespace evo::cuda {

struct ChildLaunch {
  std::string exe;                   // the binary that dispatches `__child` to run_eval_child
  std::vector<std::string> wrapper;  // e.g. {"compute-sanitizer", "--tool", "memcheck", ...}
  int timeout_ms = 0;
  std::string work_dir;              // request, result and log files go here
  std::string tag;                   // file name prefix inside work_dir, e.g. "gates", "memcheck"
};

struct ChildOutcome {
  v1::Evaluation evaluation;  // status OK/INCORRECT/CRASH from the child, or TIMEOUT/CRASH
  bool result_written = false;
  int exit_code = -1;         // -1 when killed
  std::string log;            // tail of the child's stdout+stderr
  double wall_ms = 0;         // from start to exit: the gates plus the process's own start-up
};

// req.result_path is set here.
ChildOutcome run_evaluation_child(EvalRequest req, const ChildLaunch& how);

// The two halves of it that a serving child shares (evaluation_server.h): the request written
// into how.work_dir (sets req.result_path; "" or why it could not be written), and what a child's
// exit, or a result it wrote, says of the evaluation.
std::string write_request(EvalRequest& req, const ChildLaunch& how, std::string* request_path);
ChildOutcome outcome_of(const ChildExit& exit, const std::string& result_path, int timeout_ms);

}  // namespace evo::cuda
