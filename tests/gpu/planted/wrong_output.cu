// Planted fault: runs cleanly and writes every element, but writes o = q. The correctness gate
// must call it INCORRECT.
namespace planted {
template <int CAUSAL>
__global__ void wrong_output(const FaParams p) {
  const long long n = (long long)p.batch * p.heads * p.seq_q * 64;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    o_of(p)[i] = q_of(p)[i];
}
}  // namespace planted
