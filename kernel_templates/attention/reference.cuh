// Float32 reference attention for the correctness gate. Deliberately simple: one warp per query
// row, each lane owning head_dim/32 of the dimensions in registers; two passes over the keys (max,
// then exp-sum and P*V), float32 throughout. Not timed, but it must finish the largest gate shapes
// (2x16x4096x128) well inside the watchdog, which a thread-per-row version accumulating in global
// memory did not. Launch: blockDim.x a multiple of 32, one row per warp, grid.y = batch*heads.
// K and V have heads_kv heads (query head h reads h / (heads / heads_kv)); causal aligns the
// diagonal bottom-right (row i sees keys 0 .. i + seq_k - seq_q). With cu_seqlens_q and
// cu_seqlens_k (a packed batch) the tensors are [tokens, heads, head_dim], sequence b at rows
// cu_seqlens[b] .. cu_seqlens[b + 1], and seq_q and seq_k are the longest lengths (the grid's).
// One kernel per element type of Q, K and V (evo::reference_attention_kernel names them), all in
// one compile of this text; e4m3 checks run the float one on the values their bytes stand for.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define EVO_REFERENCE_MAX_DIMS_PER_LANE 4  // head_dim up to 128

__device__ __forceinline__ float evo_reference_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float evo_reference_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float evo_reference_float(float x) { return x; }

template <class Elem>
__device__ void evo_reference_attention(const Elem* __restrict__ q, const Elem* __restrict__ k,
                                        const Elem* __restrict__ v, float* __restrict__ o,
                                        const int* __restrict__ cu_seqlens_q,
                                        const int* __restrict__ cu_seqlens_k, int batch, int heads,
                                        int heads_kv, int seq_q, int seq_k, int head_dim,
                                        float softmax_scale, int causal) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int bh = blockIdx.y;
  if (bh >= batch * heads || head_dim > 32 * EVO_REFERENCE_MAX_DIMS_PER_LANE) return;
  const int b = bh / heads, h = bh % heads, h_kv = h / (heads / heads_kv);
  // Where row 0 of this (batch, head) lies and how far apart its rows are, in Q/O and in K/V.
  long long q_base, kv_base, q_stride = head_dim, kv_stride = head_dim;
  if (cu_seqlens_q != nullptr) {
    seq_q = cu_seqlens_q[b + 1] - cu_seqlens_q[b];
    seq_k = cu_seqlens_k[b + 1] - cu_seqlens_k[b];
    q_stride = (long long)heads * head_dim;
    kv_stride = (long long)heads_kv * head_dim;
    q_base = cu_seqlens_q[b] * q_stride + (long long)h * head_dim;
    kv_base = cu_seqlens_k[b] * kv_stride + (long long)h_kv * head_dim;
  } else {
    q_base = (long long)bh * seq_q * head_dim;
    kv_base = ((long long)b * heads_kv + h_kv) * seq_k * head_dim;
  }
  if (row >= seq_q) return;
  const Elem* kb = k + kv_base;
  const Elem* vb = v + kv_base;
  const Elem* qr = q + q_base + row * q_stride;
  const int last_key = causal ? min(row + seq_k - seq_q, seq_k - 1) : seq_k - 1;

  float qf[EVO_REFERENCE_MAX_DIMS_PER_LANE], acc[EVO_REFERENCE_MAX_DIMS_PER_LANE];
#pragma unroll
  for (int i = 0; i < EVO_REFERENCE_MAX_DIMS_PER_LANE; ++i) {
    const int d = lane + 32 * i;
    qf[i] = d < head_dim ? evo_reference_float(qr[d]) : 0.f;
    acc[i] = 0.f;
  }
  auto score = [&](int j) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < EVO_REFERENCE_MAX_DIMS_PER_LANE; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) s += qf[i] * evo_reference_float(kb[j * kv_stride + d]);
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s * softmax_scale;
  };

  float row_max = __int_as_float(static_cast<int>(0xff800000u));  // -inf; NVRTC has no <math.h>
  for (int j = 0; j <= last_key; ++j) row_max = fmaxf(row_max, score(j));
  float denom = 0.f;
  for (int j = 0; j <= last_key; ++j) {
    const float p = expf(score(j) - row_max);
    denom += p;
#pragma unroll
    for (int i = 0; i < EVO_REFERENCE_MAX_DIMS_PER_LANE; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) acc[i] += p * evo_reference_float(vb[j * kv_stride + d]);
    }
  }
  const float inv = denom > 0.f ? 1.f / denom : 0.f;
  float* orow = o + q_base + row * q_stride;
#pragma unroll
  for (int i = 0; i < EVO_REFERENCE_MAX_DIMS_PER_LANE; ++i) {
    const int d = lane + 32 * i;
    if (d < head_dim) orow[d] = acc[i] * inv;
  }
}

extern "C" __global__ void evo_reference_attention_fp16(const __half* q, const __half* k, const __half* v,
                                                        float* o, const int* cu_seqlens_q,
                                                        const int* cu_seqlens_k, int batch, int heads,
                                                        int heads_kv, int seq_q, int seq_k, int head_dim,
                                                        float softmax_scale, int causal) {
  evo_reference_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv, seq_q, seq_k,
                          head_dim, softmax_scale, causal);
}

extern "C" __global__ void evo_reference_attention_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                        const __nv_bfloat16* v, float* o,
                                                        const int* cu_seqlens_q, const int* cu_seqlens_k,
                                                        int batch, int heads, int heads_kv, int seq_q,
                                                        int seq_k, int head_dim, float softmax_scale,
                                                        int causal) {
  evo_reference_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv, seq_q, seq_k,
                          head_dim, softmax_scale, causal);
}

extern "C" __global__ void evo_reference_attention_fp32(const float* q, const float* k, const float* v, float* o,
                                                        const int* cu_seqlens_q, const int* cu_seqlens_k,
                                                        int batch, int heads, int heads_kv, int seq_q, int seq_k,
                                                        int head_dim, float softmax_scale, int causal) {
  evo_reference_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv, seq_q, seq_k,
                          head_dim, softmax_scale, causal);
}
