#pragma once
// The parent of several workers on one host (`evo-worker --all-gpus`, `evo-worker --backend model
// --workers N`; host_workers.h plans them). Each worker is a child process of its own, so one
// dying does not take the others. The parent forwards SIGTERM and SIGINT to every child, restarts
// nothing, and once the last child has ended returns 1 after one line on stderr for each worker
// that failed (exited non-zero, or died of a signal it was not forwarded), 0 when none did.
// A child whose parent dies gets SIGTERM (Linux's parent-death signal), so none is left behind.
#include <string>
#include <vector>

namespace evo {

struct SupervisedWorker {
  std::string label;               // for people: "the worker on GPU 3", "model worker 1"
  std::string name;                // the name it registers under: "HOST:gpu3"
  std::vector<std::string> argv;   // argv[0]: the program to execute (a path)
};

// Blocks SIGTERM, SIGINT and SIGCHLD in the calling thread while it runs (other threads of the
// process must block them too: evo-worker's parent has no other thread) and restores the mask.
int supervise(const std::vector<SupervisedWorker>& workers);

// "exited with status 3", "was killed by signal 9 (Killed)": a waitpid status, for people.
std::string describe_exit(int wait_status);

}  // namespace evo
