#pragma once
// A kernel loaded from a cubin with the CUDA runtime's library API (no driver API, so nothing
// links libcuda), launched the way the gates launch a candidate: its one parameter block by value
// (the family's, FamilyRuntime fills it), programmatic stream serialization allowed. Used only
// inside the evaluation child.
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "device_limits.h"
#include "family_runtime.h"

namespace evo::cuda {

struct LaunchDims {
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t threads = 0;
  int64_t smem_bytes = 0;
  // grid[0] counts a persistent kernel's work tiles: the launch takes at most as many blocks as
  // the device holds at once, and at most persistent_blocks where that is nonzero.
  bool persistent = false;
  int64_t persistent_blocks = 0;
};

// The largest parameter block a launch takes: the classic limit of a kernel's parameters.
inline constexpr size_t kMaxKernelParamBytes = 4096;
// The largest thread-block cluster every sm_90 device runs; larger ones must be allowed per kernel.
inline constexpr int kPortableClusterSize = 8;

class LoadedKernel {
 public:
  // Throws CudaFailure when the cubin cannot be loaded or has no such kernel.
  LoadedKernel(const std::string& cubin_path, const std::string& lowered_name);
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  // Raises the dynamic shared memory limit when the launch needs more than kSmemPerBlockDefault,
  // and, before the first launch, allows a compiled cluster beyond kPortableClusterSize; for a
  // persistent launch, counts the blocks the device runs at once.
  void prepare(const LaunchDims& dims);
  // Asynchronous; throws CudaFailure if the launch itself is refused (or the block is larger
  // than kMaxKernelParamBytes).
  void launch(const KernelParams& params, const LaunchDims& dims, cudaStream_t stream) const;
  // For a launch of another shape (the family's reference: FamilyRuntime launches it).
  cudaKernel_t handle() const { return kernel_; }

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  int64_t smem_raised_to_ = kSmemPerBlockDefault;
  bool cluster_checked_ = false;
  int64_t resident_blocks_ = 0;  // a persistent launch's blocks: SMs x blocks an SM holds
  std::string name_;
};

}  // namespace evo::cuda
