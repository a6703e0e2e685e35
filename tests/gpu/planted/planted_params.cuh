// Shared by the planted kernels: the FaParams layout of kernel_templates/fa_s512_v3/params.cuh, so
// that the evaluator launches them exactly as it launches a real candidate.
#include <cuda_fp16.h>

namespace planted {
struct FaParams {
  const __half* q;
  const __half* k;
  const __half* v;
  __half* o;
  int batch, heads, seq_q, seq_k;
  float softmax_scale;
  void* workspace;
};
}  // namespace planted
