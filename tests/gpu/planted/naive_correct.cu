// Planted control: a correct (slow) attention kernel. Must pass every gate it reaches.
namespace planted {
template <int CAUSAL>
__global__ void naive_correct(const FaParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.seq_q) return;
  naive_attention_row<CAUSAL>(p, row, blockIdx.y);
}
}  // namespace planted
