// One thread per query row, fp32 math, output in the inputs' element type (fp16 unless asked):
// slow but right. The control for the planted faults, and the body that off_by_one_write.cu
// breaks in one place.
namespace planted {
template <int CAUSAL, class Elem = __half>
__device__ void naive_attention_row(const FaParams& p, int row, int bh) {
  const int D = 64;
  const Elem* qr = q_of<Elem>(p) + ((long long)bh * p.seq_q + row) * D;
  const Elem* kb = k_of<Elem>(p) + (long long)bh * p.seq_k * D;
  const Elem* vb = v_of<Elem>(p) + (long long)bh * p.seq_k * D;
  const int last = CAUSAL ? min(row, p.seq_k - 1) : p.seq_k - 1;
  float m = __int_as_float(0xff800000);  // -inf
  for (int j = 0; j <= last; ++j) {
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += to_float(qr[d]) * to_float(kb[j * D + d]);
    m = fmaxf(m, s * p.softmax_scale);
  }
  float acc[D];
  #pragma unroll
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  float denom = 0.f;
  for (int j = 0; j <= last; ++j) {
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += to_float(qr[d]) * to_float(kb[j * D + d]);
    const float w = __expf(s * p.softmax_scale - m);
    denom += w;
    #pragma unroll
    for (int d = 0; d < D; ++d) acc[d] += w * to_float(vb[j * D + d]);
  }
  Elem* orow = o_of<Elem>(p) + ((long long)bh * p.seq_q + row) * D;
  #pragma unroll
  for (int d = 0; d < D; ++d) orow[d] = from_float<Elem>(acc[d] / denom);
}
}  // namespace planted
