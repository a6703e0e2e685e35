// gpu_tests is its own evaluation child, as evo-worker is: `gpu_tests __child <request>` runs the
// child. For the watchdog tests, EVO_GPU_TESTS_CHILD_FAULT makes the child misbehave without
// needing a GPU: "sleep" never answers, "segv" dies of SIGSEGV.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "child_main.h"
#include "kernel_compiler.h"

int main(int argc, char** argv) {
  // Before any CUDA call: the driver reads this once, at initialisation (see KernelCompiler).
  evo::disable_driver_compile_cache();
  if (argc >= 2 && std::strcmp(argv[1], "__child") == 0) {
    if (const char* fault = std::getenv("EVO_GPU_TESTS_CHILD_FAULT")) {
      if (std::strcmp(fault, "sleep") == 0)
        for (;;) pause();
      if (std::strcmp(fault, "segv") == 0) raise(SIGSEGV);
    }
    return evo::run_eval_child(argc, argv);
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
