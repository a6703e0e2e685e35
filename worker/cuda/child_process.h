#pragma once
// Runs one command as a child process in its own process group, with a watchdog. Knows nothing
// about CUDA: the evaluator uses it to run `<self> __child <request>` (optionally under
// compute-sanitizer) so that a hung or crashing kernel can only take the child down.
#include <sys/types.h>

#include <string>
#include <vector>

namespace evo::cuda {

struct ChildExit {
  bool timed_out = false;   // the watchdog fired and SIGKILLed the process group
  bool signaled = false;    // killed by a signal (other than the watchdog's)
  int signal = 0;
  int exit_code = -1;       // valid when neither timed_out nor signaled
  double wall_ms = 0;
  std::string stderr_tail;  // the last few KB the child wrote to stderr (stdout goes there too)
};

// argv[0] is the executable's path (no PATH search). Throws std::runtime_error (one line) only
// when the child cannot be started at all; everything the child does is reported in ChildExit.
// stderr and stdout of the child go to `log_path`, whose tail is returned.
ChildExit run_child(const std::vector<std::string>& argv, int timeout_ms, const std::string& log_path);

// A child whose standard input is a pipe the parent writes (*requests_fd) and whose descriptor
// answer_fd is a pipe the parent reads (*answers_fd), in its own process group, its stdout and
// stderr appended to log_path. Both parent ends are close-on-exec. Throws when it cannot start.
pid_t spawn_serving_child(const std::vector<std::string>& argv, const std::string& log_path, int answer_fd,
                          int* requests_fd, int* answers_fd);

// Reaps a child started by spawn_serving_child (SIGKILLing its group first when kill_group),
// with the tail of its log; wall_ms and timed_out are the caller's to fill.
ChildExit end_child(pid_t pid, bool kill_group, const std::string& log_path);

// The last few KB of a child's log.
std::string log_tail(const std::string& log_path);

// The absolute path of the running executable (readlink of /proc/self/exe), so that a child can be
// started as the same binary even under a wrapper such as compute-sanitizer.
std::string self_executable();

// "SIGSEGV" for 11; "signal N" for an unknown one.
std::string signal_name(int sig);

}  // namespace evo::cuda
