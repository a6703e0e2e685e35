#include "loaded_kernel.h"

#include <algorithm>
#include <cstring>

#include "cuda_error.h"

namespace evo::cuda {

LoadedKernel::LoadedKernel(const std::string& cubin_path, const std::string& lowered_name)
    : name_(lowered_name) {
  EVO_CUDA_CHECK(cudaLibraryLoadFromFile(&library_, cubin_path.c_str(), nullptr, nullptr, 0,
                                         nullptr, nullptr, 0));
  const cudaError_t err = cudaLibraryGetKernel(&kernel_, library_, lowered_name.c_str());
  if (err != cudaSuccess) {
    cudaLibraryUnload(library_);
    library_ = nullptr;
    throw CudaFailure(err, "cudaLibraryGetKernel(" + lowered_name + ")");
  }
}

LoadedKernel::~LoadedKernel() {
  if (library_) cudaLibraryUnload(library_);
}

void LoadedKernel::prepare(const LaunchDims& dims) {
  if (!cluster_checked_) {
    // A kernel whose compiled cluster holds more than the portable 8 blocks (a template may ask) must
    // be allowed the larger size before its first launch.
    cudaFuncAttributes attrs{};
    EVO_CUDA_CHECK(cudaFuncGetAttributes(&attrs, reinterpret_cast<const void*>(kernel_)));
    if (attrs.requiredClusterWidth * attrs.requiredClusterHeight * attrs.requiredClusterDepth > kPortableClusterSize) {
      int device = 0;
      EVO_CUDA_CHECK(cudaGetDevice(&device));
      EVO_CUDA_CHECK(cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, device));
    }
    cluster_checked_ = true;
  }
  if (dims.smem_bytes > smem_raised_to_) {
    int device = 0;
    EVO_CUDA_CHECK(cudaGetDevice(&device));
    EVO_CUDA_CHECK(cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(dims.smem_bytes), device));
    smem_raised_to_ = dims.smem_bytes;
  }
  if (dims.persistent) {
    int device = 0, sms = 0, per_sm = 0;
    EVO_CUDA_CHECK(cudaGetDevice(&device));
    EVO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    EVO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void*>(kernel_), static_cast<int>(dims.threads),
        static_cast<size_t>(dims.smem_bytes)));
    resident_blocks_ = std::max<int64_t>(1, int64_t{sms} * per_sm);
    if (dims.persistent_blocks > 0) resident_blocks_ = std::min(resident_blocks_, dims.persistent_blocks);
  }
}

void LoadedKernel::launch(const KernelParams& params, const LaunchDims& dims, cudaStream_t stream) const {
  if (params.size > kMaxKernelParamBytes)
    throw CudaFailure(cudaErrorInvalidValue, "a kernel parameter of " + std::to_string(params.size) + " bytes");
  alignas(64) unsigned char copy[kMaxKernelParamBytes];
  std::memcpy(copy, params.data, params.size);
  void* args[] = {copy};
  // A cudaKernel_t from cudaLibraryGetKernel stands in for the function symbol here.
  const int64_t blocks_x = dims.persistent ? std::min(dims.grid[0], resident_blocks_) : dims.grid[0];
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(dims.grid[1]),
                  static_cast<unsigned>(dims.grid[2]));
  // Programmatic, as the exported kernel launches: back-to-back launches then overlap one's
  // start with the previous one's tail, so the gates see the kernel as users will run it.
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(dims.threads));
  config.dynamicSmemBytes = static_cast<size_t>(dims.smem_bytes);
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  EVO_CUDA_CHECK(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel_), args));
}

}  // namespace evo::cuda
