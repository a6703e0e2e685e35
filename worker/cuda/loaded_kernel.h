#pragma once
// A kernel loaded from a cubin with the CUDA runtime's library API (no driver API, so nothing
// links libcuda), plus the two launch signatures the gates use: the candidate's FaParams and the
// float32 reference kernel's argument list. Used only inside the evaluation child.
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attention/params.h"
#include "device_limits.h"

namespace evo::cuda {

// The kernel's parameter, from the one definition the kernel text inlines.
using evo::FaParams;

struct LaunchDims {
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t threads = 0;
  int64_t smem_bytes = 0;
};

class LoadedKernel {
 public:
  // Throws CudaFailure when the cubin cannot be loaded or has no such kernel.
  LoadedKernel(const std::string& cubin_path, const std::string& lowered_name);
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  // Raises the dynamic shared memory limit when the launch needs more than kSmemPerBlockDefault.
  void prepare(const LaunchDims& dims);
  // Asynchronous; throws CudaFailure if the launch itself is refused.
  void launch(const FaParams& p, const LaunchDims& dims, cudaStream_t stream) const;
  // The float32 reference over the candidate's inputs (p's q, k, v, shape and scale, of the
  // reference kernel's element type) into o.
  void launch_reference(const FaParams& p, float* o, int head_dim, int causal, cudaStream_t stream) const;

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  int64_t smem_raised_to_ = kSmemPerBlockDefault;
  std::string name_;
};

}  // namespace evo::cuda
