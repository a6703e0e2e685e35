// Planted control: a correct (slow) attention kernel. Must pass every gate it reaches.
// naive_correct_dtype takes the element type as its kernel does (DTYPE: 0 fp16, 1 bf16).
namespace planted {
template <int CAUSAL>
__global__ void naive_correct(const FaParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.seq_q) return;
  naive_attention_row<CAUSAL>(p, row, blockIdx.y);
}

template <int CAUSAL, int DTYPE>
__global__ void naive_correct_dtype(const FaParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.seq_q) return;
  naive_attention_row<CAUSAL, typename ElementOf<DTYPE>::type>(p, row, blockIdx.y);
}
}  // namespace planted
