// Planted fault: correct output, plus one write one element past the end of o. Within the
// allocation's rounding it does not fault, so only the sanitizer gate can catch it: SANITIZER_ERROR.
namespace planted {
template <int CAUSAL>
__global__ void off_by_one_write(const FaParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row == 0 && blockIdx.x == 0 && blockIdx.y == gridDim.y - 1)
    o_of(p)[(long long)gridDim.y * p.seq_q * 64] = __float2half(0.f);
  if (row >= p.seq_q) return;
  naive_attention_row<CAUSAL>(p, row, blockIdx.y);
}
}  // namespace planted
