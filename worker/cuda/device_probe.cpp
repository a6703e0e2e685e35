#include "device_probe.h"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "gate_thresholds.h"
#include "kernel_compiler.h"

namespace evo::cuda {
namespace {

std::string version_text(int v) {  // 12080 -> "12.8"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int attribute(cudaDeviceAttr a, int gpu) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, a, gpu) != cudaSuccess) return 0;
  return value;
}

}  // namespace

std::string arch_for(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major == 9 && minor == 0) arch += "a";
  return arch;
}

std::string no_gpu_message(const char* cuda_error_string) {
  return std::string("no GPU found (") + cuda_error_string + "); use --backend model";
}

v1::DeviceInfo probe_device(int gpu) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) throw std::runtime_error(no_gpu_message(cudaGetErrorString(err)));
  if (count == 0) throw std::runtime_error(no_gpu_message("no CUDA device visible"));
  if (gpu < 0 || gpu >= count)
    throw std::runtime_error("no GPU " + std::to_string(gpu) + " (" + std::to_string(count) +
                             " visible, numbered from 0)");
  cudaDeviceProp prop{};
  const cudaError_t perr = cudaGetDeviceProperties(&prop, gpu);
  if (perr != cudaSuccess)
    throw std::runtime_error(std::string("cannot query GPU ") + std::to_string(gpu) + ": " +
                             cudaGetErrorString(perr));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);

  v1::DeviceInfo d;
  d.set_gpu_name(prop.name);
  d.set_arch(arch_for(prop.major, prop.minor));
  d.set_sm_count(prop.multiProcessorCount);
  // Clock rates left cudaDeviceProp in CUDA 13; the attributes are in kHz.
  d.set_sm_clock_mhz(attribute(cudaDevAttrClockRate, gpu) / 1000);
  d.set_mem_clock_mhz(attribute(cudaDevAttrMemoryClockRate, gpu) / 1000);
  d.set_driver_version(version_text(driver));
  d.set_cuda_version(version_text(runtime));
  d.set_nvrtc_version(KernelCompiler::nvrtc_version());
  d.set_smem_per_block_optin(static_cast<int64_t>(prop.sharedMemPerBlockOptin));
  d.set_backend("cuda");
  // The key of cached results: one measured before the resident figure existed lacks it.
  d.set_timing("graph replays of " + std::to_string(gates::kLaunchesPerTimingSample) +
               "+ back-to-back programmatic launches per event pair, inputs rotated past L2, "
               "then on one L2-resident set");
  d.set_device_class(d.arch() + "/" + d.gpu_name());
  d.set_l2_bytes(prop.l2CacheSize);
  d.set_global_mem_bytes(static_cast<int64_t>(prop.totalGlobalMem));
  return d;
}

}  // namespace evo::cuda
