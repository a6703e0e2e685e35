#pragma once
// What GPU the worker has, read through the CUDA runtime's device queries. These create no CUDA
// context (cudaGetDeviceProperties, cudaDeviceGetAttribute and the version calls only initialise
// the driver), so probing in the parent keeps every candidate's context in its child.
#include "evo/evo.pb.h"

namespace evo::cuda {

// Throws std::runtime_error with one line for people when there is no usable GPU:
// "no GPU found (CUDA driver version is insufficient for CUDA runtime version); use --backend model".
// Also throws, one line, for a gpu index that does not exist.
v1::DeviceInfo probe_device(int gpu);

// "sm_90a" for compute capability 9.0 (the arch-specific target that unlocks wgmma/setmaxnreg),
// "sm_<major><minor>" otherwise.
std::string arch_for(int major, int minor);

// The one line for a failed cudaGetDeviceCount.
std::string no_gpu_message(const char* cuda_error_string);

}  // namespace evo::cuda
