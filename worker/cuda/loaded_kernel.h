#pragma once
// A kernel loaded from a cubin with the CUDA runtime's library API (no driver API, so nothing
// links libcuda), plus the two launch signatures the gates use: the candidate's FaParams and the
// float32 reference kernel's argument list. Used only inside the evaluation child.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace evo::cuda {

// Mirrors `evo::FaParams` of kernel_templates/fa_s512_v3/params.cuh byte for byte: the kernel
// takes it by value, so the layout is the ABI. Keep the two in step.
struct FaParams {
  const __half* q;
  const __half* k;
  const __half* v;
  __half* o;
  int batch, heads, seq_q, seq_k;
  float softmax_scale;
  void* workspace;  // split-KV scratch, zeroed once; nullptr when the launch needs none
  // CUtensorMap descriptors for instantiations that move tiles through TMA; zeros otherwise.
  struct alignas(64) TensorMap {
    unsigned long long opaque[16];
  };
  TensorMap q_map, k_map, v_map, o_map;
};
static_assert(offsetof(FaParams, workspace) == 4 * sizeof(void*) + 5 * 4 + 4, "FaParams layout drifted");
static_assert(offsetof(FaParams, q_map) == 64 && sizeof(FaParams::TensorMap) == 128,
              "FaParams layout drifted");
static_assert(sizeof(FaParams) == 64 + 4 * 128, "FaParams layout drifted");
static_assert(alignof(FaParams) == 64, "FaParams alignment drifted");

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

  // Raises the dynamic shared memory limit when the launch needs more than the default 48 KB.
  void prepare(const LaunchDims& dims);
  // Asynchronous; throws CudaFailure if the launch itself is refused.
  void launch(const FaParams& p, const LaunchDims& dims, cudaStream_t stream) const;
  void launch_reference(const __half* q, const __half* k, const __half* v, float* o, int batch,
                        int heads, int seq_q, int seq_k, int head_dim, float scale, int causal,
                        cudaStream_t stream) const;

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  int64_t smem_raised_to_ = 48 * 1024;
  std::string name_;
};

}  // namespace evo::cuda
