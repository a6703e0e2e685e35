// Planted fault: an online softmax over 128-key tiles that, as LAZY_RESCALE does, raises a row's
// base only when a tile's max passes it by more than 8 (log2), but then shrinks the running sum
// and not the output accumulated so far. On uniform inputs no tile after the first passes the
// base by that much and the output is right; where scores grow along the keys it is wrong. The
// correctness gate's growing-scores check must call it INCORRECT.
namespace planted {
template <int CAUSAL>
__global__ void lazy_rescale_forgets_output(const FaParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.seq_q) return;
  const int D = 64;
  const long long bh = blockIdx.y;
  const __half* qr = q_of(p) + (bh * p.seq_q + row) * D;
  const __half* kb = k_of(p) + bh * p.seq_k * D;
  const __half* vb = v_of(p) + bh * p.seq_k * D;
  const int end = CAUSAL ? min(row + 1, p.seq_k) : p.seq_k;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float base = __int_as_float(0xff800000);  // -inf
  float sum = 0.f;
  float acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  for (int t0 = 0; t0 < end; t0 += 128) {
    const int t1 = min(t0 + 128, end);
    auto score = [&](int j) {
      float s = 0.f;
      for (int d = 0; d < D; ++d) s += __half2float(qr[d]) * __half2float(kb[j * D + d]);
      return s * scale_log2;
    };
    float mx = __int_as_float(0xff800000);
    for (int j = t0; j < t1; ++j) mx = fmaxf(mx, score(j));
    if (mx > base + 8.f) {
      sum *= exp2f(base - mx);  // the fault: acc keeps its old scale
      base = mx;
    }
    for (int j = t0; j < t1; ++j) {
      const float w = exp2f(score(j) - base);
      sum += w;
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] += w * __half2float(vb[j * D + d]);
    }
  }
  __half* orow = o_of(p) + (bh * p.seq_q + row) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) orow[d] = __float2half(acc[d] / sum);
}
}  // namespace planted
