#pragma once
// A serving evaluation child: one `<evo-worker> __child_server` process that answers evaluation
// after evaluation, so that a candidate does not pay for a process start, a CUDA context and the
// reference kernels' load (child_main.h). It keeps the isolation of a child per evaluation where
// it matters: a candidate that hangs is killed with its process group by the watchdog, one that
// crashes or fails a gate takes the process down with it (the server ends after any answer but a
// passing one), and the next evaluation starts a new process. The sanitizer gate, which wraps its
// own process, does not use it.
#include <sys/types.h>

#include <memory>
#include <string>

#include "evaluation_child.h"

namespace evo::cuda {

// The serving child's answers ("done <exit code>\n") travel on this descriptor; its standard
// output and error go to its log.
inline constexpr int kServerAnswerFd = 3;

class EvaluationServer {
 public:
  // exe: the binary that dispatches `__child_server` to run_eval_child_server; its log goes into
  // log_dir, which must outlive the server.
  EvaluationServer(std::string exe, std::string log_dir);
  ~EvaluationServer();
  EvaluationServer(const EvaluationServer&) = delete;
  EvaluationServer& operator=(const EvaluationServer&) = delete;

  // As run_evaluation_child (how.wrapper must be empty; how.exe and how.work_dir are used, the
  // request and result files go to work_dir), from the serving process, started first if none
  // runs. Never throws for anything the child does.
  ChildOutcome evaluate(EvalRequest req, const ChildLaunch& how);

  // Processes started so far (the first, and one after each that ended), and the running one's id
  // (-1 when none runs).
  int starts() const { return starts_; }
  pid_t process_id() const { return pid_; }

 private:
  void start();
  // Ends the process (SIGKILL to its group when kill) and reaps it; fills exit when given.
  void stop(bool kill, struct ChildExit* exit);

  std::string exe_;
  std::string log_path_;
  pid_t pid_ = -1;
  int requests_fd_ = -1;  // the child's standard input
  int answers_fd_ = -1;   // the child's kServerAnswerFd
  int starts_ = 0;
  int answered_ = 0;      // requests the running process answered
};

}  // namespace evo::cuda
