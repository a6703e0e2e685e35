#pragma once
// A failed CUDA runtime call inside the evaluation child, carrying the error so that the child can
// report it: errors from a kernel (illegal address, launch failure, ...) are a CRASH of the
// candidate, named by the error's name.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace evo::cuda {

class CudaFailure : public std::runtime_error {
 public:
  CudaFailure(cudaError_t err, const std::string& what_call)
      : std::runtime_error(std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
                           ") in " + what_call),
        error_(err) {}
  cudaError_t error() const { return error_; }

 private:
  cudaError_t error_;
};

inline void check_cuda(cudaError_t err, const char* what_call) {
  if (err != cudaSuccess) throw CudaFailure(err, what_call);
}

}  // namespace evo::cuda

#define EVO_CUDA_CHECK(call) ::evo::cuda::check_cuda((call), #call)
