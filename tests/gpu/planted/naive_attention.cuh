// One thread per query row, fp32 math, fp16 output: slow but right. The control for the planted
// faults, and the body that off_by_one_write.cu breaks in one place.
namespace planted {
template <int CAUSAL>
__device__ void naive_attention_row(const FaParams& p, int row, int bh) {
  const int D = 64;
  const __half* qr = p.q + ((long long)bh * p.seq_q + row) * D;
  const __half* kb = p.k + (long long)bh * p.seq_k * D;
  const __half* vb = p.v + (long long)bh * p.seq_k * D;
  const int last = CAUSAL ? min(row, p.seq_k - 1) : p.seq_k - 1;
  float m = __int_as_float(0xff800000);  // -inf
  for (int j = 0; j <= last; ++j) {
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += __half2float(qr[d]) * __half2float(kb[j * D + d]);
    m = fmaxf(m, s * p.softmax_scale);
  }
  float acc[D];
  #pragma unroll
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  float denom = 0.f;
  for (int j = 0; j <= last; ++j) {
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += __half2float(qr[d]) * __half2float(kb[j * D + d]);
    const float w = __expf(s * p.softmax_scale - m);
    denom += w;
    #pragma unroll
    for (int d = 0; d < D; ++d) acc[d] += w * __half2float(vb[j * D + d]);
  }
  __half* orow = p.o + ((long long)bh * p.seq_q + row) * D;
  #pragma unroll
  for (int d = 0; d < D; ++d) orow[d] = __float2half(acc[d] / denom);
}
}  // namespace planted
