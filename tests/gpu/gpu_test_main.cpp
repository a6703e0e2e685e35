// gpu_tests is its own evaluation child, as evo-worker is: `gpu_tests __child <request>` runs the
// child, `gpu_tests __child_server` the serving child. For the watchdog tests,
// EVO_GPU_TESTS_CHILD_FAULT makes either misbehave without needing a GPU: "sleep" never answers,
// "segv" dies of SIGSEGV; and it makes a serving child answer without one: "ok" (or "incorrect")
// answers every request with that status and keeps serving.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "child_main.h"
#include "eval_request.h"
#include "evaluation_server.h"
#include "evo/evo.pb.h"
#include "kernel_compiler.h"

namespace {

// A serving child without a GPU: every request answered with `status`, whatever it asks.
int serve_without_gpu(evo::v1::EvalStatus status) {
  std::string path;
  while (std::getline(std::cin, path)) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const evo::cuda::EvalRequest req = evo::cuda::request_from_json(text.str());
    evo::v1::Evaluation e;
    e.set_status(status);
    e.set_fitness_us(status == evo::v1::OK ? 1.0 : 0.0);
    std::ofstream out(req.result_path, std::ios::binary);
    e.SerializeToOstream(&out);
    out.close();
    const std::string answer = "done 0\n";
    if (write(evo::cuda::kServerAnswerFd, answer.data(), answer.size()) < 0) return 2;
  }
  return 0;
}

}  // namespace

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
  if (argc >= 2 && std::strcmp(argv[1], "__child_server") == 0) {
    if (const char* fault = std::getenv("EVO_GPU_TESTS_CHILD_FAULT")) {
      if (std::strcmp(fault, "sleep") == 0)
        for (;;) pause();
      if (std::strcmp(fault, "segv") == 0) raise(SIGSEGV);
      if (std::strcmp(fault, "ok") == 0) return serve_without_gpu(evo::v1::OK);
      if (std::strcmp(fault, "incorrect") == 0) return serve_without_gpu(evo::v1::INCORRECT);
    }
    return evo::run_eval_child_server();
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
