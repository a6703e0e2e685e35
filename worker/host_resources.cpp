#include "host_resources.h"

#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#ifdef EVO_HAVE_CUDA_EVALUATOR
#include <cuda_runtime_api.h>

#include "cuda/device_probe.h"
#endif

namespace evo {

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int visible_gpu_count() {
#ifdef EVO_HAVE_CUDA_EVALUATOR
  int count = 0;
  // Initialises the driver only; no context is created (the workers' children create theirs).
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) throw std::runtime_error(cuda::no_gpu_message(cudaGetErrorString(err)));
  if (count == 0) throw std::runtime_error(cuda::no_gpu_message("no CUDA device visible"));
  return count;
#else
  throw std::runtime_error("this build has no cuda evaluator; use --backend model");
#endif
}

int default_compile_threads(int host_cores, int workers_on_host) {
  return std::max(1, host_cores / std::max(1, workers_on_host));
}

int workers_on_host_for(const std::string& backend) {
  if (backend != "cuda") return 1;
  try {
    return visible_gpu_count();
  } catch (const std::exception&) {
    return 1;
  }
}

}  // namespace evo
