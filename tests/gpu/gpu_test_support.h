#pragma once
// Shared by the GPU tests: is there a GPU, one evaluator for the whole binary, the planted sources.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "attention/problem.h"
#include "cuda_evaluator.h"

namespace evo::testing_gpu {

// Empty when a GPU is usable; otherwise why not (the probe's one line).
const std::string& no_gpu_reason();

// The evaluator every GPU test shares (default watchdog); nullptr without a GPU.
CudaEvaluator* shared_evaluator();

// planted_params.cuh + (naive_attention.cuh) + planted/<file>, ready for NVRTC.
std::string planted_source(const std::string& file);

// A planted kernel named planted::<name><CAUSAL>, one thread per query row in blocks of 128.
SourceKernel planted_kernel(const std::string& file, const std::string& name);
// The same for a kernel that takes the element type: planted::<name><CAUSAL, DTYPE>.
SourceKernel planted_dtype_kernel(const std::string& file, const std::string& name);

std::vector<Problem> gate_shapes();  // the three shapes of issue 2, causal and not

// An attention problem as the evaluator takes it, from its text (attention::parse_shape).
Problem problem(std::string_view text, bool causal_default = false);

}  // namespace evo::testing_gpu

#define EVO_REQUIRE_GPU()                                                              \
  do {                                                                                 \
    if (!::evo::testing_gpu::no_gpu_reason().empty())                                  \
      GTEST_SKIP() << "no GPU: " << ::evo::testing_gpu::no_gpu_reason();               \
  } while (0)
