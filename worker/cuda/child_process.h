#pragma once
// Runs one command as a child process in its own process group, with a watchdog. Knows nothing
// about CUDA: the evaluator uses it to run `<self> __child <request>` (optionally under
// compute-sanitizer) so that a hung or crashing kernel can only take the child down.
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

// The absolute path of the running executable (readlink of /proc/self/exe), so that a child can be
// started as the same binary even under a wrapper such as compute-sanitizer.
std::string self_executable();

// "SIGSEGV" for 11; "signal N" for an unknown one.
std::string signal_name(int sig);

}  // namespace evo::cuda
