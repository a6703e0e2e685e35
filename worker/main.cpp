// evo-worker: the GPU worker daemon (default), several of them under one parent (--all-gpus,
// --workers N: host_workers.h), the one-shot `eval` command, and the hidden `__child` and
// `__child_server` entries the cuda evaluator re-executes itself as for process isolation.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "eval_command.h"
#include "kernel_compiler.h"
#ifdef EVO_HAVE_CUDA_EVALUATOR
#include "cuda/child_main.h"
#endif
#ifdef EVO_HAVE_DAEMON
#include "daemon/worker_daemon.h"
#include "host_workers.h"
#endif

namespace {

constexpr const char* kUsage = R"(usage: evo-worker [daemon options]      run the worker daemon (see evo-worker --help in a build with the daemon)
       evo-worker eval [options]        evaluate one genome once (evo-worker eval --help)

  -h, --help   this text
)";

}  // namespace

int main(int argc, char** argv) {
  // Before any CUDA call: the driver reads this once, at initialisation (see KernelCompiler).
  evo::disable_driver_compile_cache();
  using namespace evo;  // the entry points live in evo::
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "eval") return run_eval_command(argc - 1, argv + 1);
  if (command == "__child" || command == "__child_server") {
#ifdef EVO_HAVE_CUDA_EVALUATOR
    return command == "__child" ? run_eval_child(argc - 1, argv + 1) : run_eval_child_server();
#else
    std::fprintf(stderr, "evo-worker: this build has no cuda evaluator\n");
    return 2;
#endif
  }
#ifdef EVO_HAVE_DAEMON
  if (asks_for_host_workers(argc, argv))
    return run_host_workers(argc, argv, [](const std::vector<std::string>& worker_argv) {
      std::vector<char*> args;
      for (const auto& a : worker_argv) args.push_back(const_cast<char*>(a.c_str()));
      return check_worker_daemon_args(static_cast<int>(args.size()), args.data());
    });
  return run_worker_daemon(argc, argv);
#else
  if (command == "-h" || command == "--help") {
    std::fputs(kUsage, stdout);
    std::puts("This build has no daemon: only `evo-worker eval` is available.");
    return 0;
  }
  std::fprintf(stderr, "evo-worker: this build has no daemon; use `evo-worker eval` (see --help)\n");
  return 2;
#endif
}
