// Float32 reference attention for the correctness gate. Deliberately simple: one thread per query
// row, two passes over the keys (max, then exp-sum and P*V), float32 throughout. Not timed.
#include <cuda_fp16.h>

extern "C" __global__ void evo_reference_attention(const __half* __restrict__ q,
                                                   const __half* __restrict__ k,
                                                   const __half* __restrict__ v,
                                                   float* __restrict__ o, int batch, int heads,
                                                   int seq_q, int seq_k, int head_dim,
                                                   float softmax_scale, int causal) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int bh = blockIdx.y;
  if (row >= seq_q || bh >= batch * heads) return;
  const __half* qr = q + ((long long)bh * seq_q + row) * head_dim;
  const __half* kb = k + (long long)bh * seq_k * head_dim;
  const __half* vb = v + (long long)bh * seq_k * head_dim;
  float* orow = o + ((long long)bh * seq_q + row) * head_dim;
  const int last_key = causal ? min(row, seq_k - 1) : seq_k - 1;

  float row_max = __int_as_float(static_cast<int>(0xff800000u));  // -inf; NVRTC has no <math.h>
  for (int j = 0; j <= last_key; ++j) {
    float s = 0.f;
    for (int d = 0; d < head_dim; ++d)
      s += __half2float(qr[d]) * __half2float(kb[(long long)j * head_dim + d]);
    row_max = fmaxf(row_max, s * softmax_scale);
  }
  for (int d = 0; d < head_dim; ++d) orow[d] = 0.f;
  float denom = 0.f;
  for (int j = 0; j <= last_key; ++j) {
    float s = 0.f;
    for (int d = 0; d < head_dim; ++d)
      s += __half2float(qr[d]) * __half2float(kb[(long long)j * head_dim + d]);
    const float p = expf(s * softmax_scale - row_max);
    denom += p;
    for (int d = 0; d < head_dim; ++d) orow[d] += p * __half2float(vb[(long long)j * head_dim + d]);
  }
  const float inv = denom > 0.f ? 1.f / denom : 0.f;
  for (int d = 0; d < head_dim; ++d) orow[d] *= inv;
}
