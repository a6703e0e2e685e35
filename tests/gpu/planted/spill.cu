// Planted fault: a big array indexed by run-time values lives in local memory (a stack frame),
// the seed kernel's failure mode. The resource gate must reject it before any launch.
namespace planted {
template <int CAUSAL>
__global__ void spill(const FaParams p) {
  float scratch[512];
  const int t = threadIdx.x;
  for (int i = 0; i < 512; ++i) scratch[(i * 37 + t) & 511] = __half2float(q_of(p)[(i + t) & 63]);
  float sum = 0.f;
  for (int i = 0; i < 512; ++i) sum += scratch[(i * p.seq_q + t) & 511];
  o_of(p)[blockIdx.x * blockDim.x + t] = __float2half(sum);
}
}  // namespace planted
