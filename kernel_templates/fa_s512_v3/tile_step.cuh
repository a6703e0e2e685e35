#pragma once
// The steps of one K/V tile: S = Q K^T (mma.sync or wgmma), the mask, the online softmax, and
// O += P V.
#include "kernel_traits.cuh"
#include "ptx.cuh"
#include "ptx_wgmma.cuh"
#include "smem_tiles.cuh"

namespace evo {
namespace fa {

// S = Q K^T for this warp's rows and keys, through mma.sync: Q from registers, K by ldmatrix.
template <class T>
__device__ __forceinline__ void scores_mma_sync(
    float (&s)[T::kMTiles][T::kSTiles][4], const unsigned (&q_frag)[T::kMTiles][T::kQkSteps][4],
    const __half* k_tile, int key_w, int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kSTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[mt][nt][i] = 0.f;
#pragma unroll
  for (int ks = 0; ks < T::kQkSteps; ++ks)
#pragma unroll
    for (int np = 0; np < T::kSTiles / 2; ++np) {
      unsigned b[4];
      const int key = key_w + np * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int col = ks * 16 + ((lane >> 3) & 1) * 8;
      ldmatrix_x4(b, k_tile + tile_offset<T, T::kBlockN>(key, col));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816(s[mt][2 * np], q_frag[mt][ks], b[0], b[1]);
        mma_16816(s[mt][2 * np + 1], q_frag[mt][ks], b[2], b[3]);
      }
    }
}

// S = Q K^T for the warpgroup's 64 rows: one chain of HEAD_DIM/16 wgmmas, issued and committed
// as one group but not waited for. The first overwrites s.
template <class T>
__device__ __forceinline__ void issue_scores_wgmma(float (&s)[T::kSTiles][4], const __half* q_tile,
                                                   const __half* k_tile, int row_wg, int key_w) {
  const unsigned long long q_desc = smem_desc(q_tile + tile_offset<T, T::kBlockM>(row_wg, 0), 16);
  const unsigned long long k_desc =
      per_iteration<T>(smem_desc(k_tile + tile_offset<T, T::kBlockN>(key_w, 0), 16));
#pragma unroll
  for (int ks = 0; ks < T::kQkSteps; ++ks)
    Wgmma<T::kKeysPerWarp>::ss(s, q_desc + (tile_offset<T, T::kBlockM>(0, ks * 16) >> 3),
                               k_desc + (tile_offset<T, T::kBlockN>(0, ks * 16) >> 3), ks > 0);
  wgmma_commit();
}

// P as m16n8k16 A fragments: the fp32 scores of each k16 step of keys, rounded to fp16 pairs.
template <class T>
__device__ __forceinline__ void pack_p(unsigned (&a)[4], const float (&s)[T::kSTiles][4], int kk) {
  a[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// O += P V through mma.sync, V fragments by transposing ldmatrix, and the rows' sums of P into
// every column of `row_sum_mma` (B all ones).
template <class T>
__device__ __forceinline__ void accumulate_pv_mma_sync(float (&acc)[T::kMTiles][T::kOTiles][4],
                                                       float (&row_sum_mma)[T::kMTiles][1][4],
                                                       const float (&s)[T::kMTiles][T::kSTiles][4],
                                                       const __half* v_tile, int key_w, int lane) {
  constexpr unsigned kHalf2Ones = 0x3C003C00u;  // fp16 1.0 twice: a B fragment of ones
#pragma unroll
  for (int kk = 0; kk < T::kPvSteps; ++kk) {
    unsigned a[T::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt) pack_p<T>(a[mt], s[mt], kk);
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
      mma_16816(row_sum_mma[mt][0], a[mt], kHalf2Ones, kHalf2Ones);
#pragma unroll
    for (int dp = 0; dp < T::kOTiles / 2; ++dp) {
      unsigned b[4];
      const int key = key_w + kk * 16 + (lane & 15);
      const int col = dp * 16 + (lane >> 4) * 8;
      ldmatrix_x4_trans(b, v_tile + tile_offset<T, T::kBlockN>(key, col));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816(acc[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O += P V for the warpgroup: P from registers, V (head dim contiguous, N-major) through a
// descriptor; a 128-wide head dim spans two panels. Committed as one group, not waited for.
template <class T>
__device__ __forceinline__ void issue_pv_wgmma(float (&acc)[T::kOTiles][4],
                                               const unsigned (&p_frag)[T::kPvSteps][4],
                                               const __half* v_tile, int key_w) {
  const unsigned long long v_desc = per_iteration<T>(
      smem_desc(v_tile + tile_offset<T, T::kBlockN>(key_w, 0), T::kBlockN * 64 * 2));
#pragma unroll
  for (int kk = 0; kk < T::kPvSteps; ++kk)
    Wgmma<T::kHeadDim>::rs(acc, p_frag[kk], v_desc + (tile_offset<T, T::kBlockN>(kk * 16, 0) >> 3));
  wgmma_commit();
}

// Masks keys past the sequence end and (causal) above the diagonal.
template <class T>
__device__ __forceinline__ void mask_scores(float (&s)[T::kMTiles][T::kSTiles][4], int row0,
                                            int key0, int seq_k, int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kSTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + mt * 16 + (lane >> 2) + (i >= 2 ? 8 : 0);
        const int key = key0 + nt * 8 + (lane & 3) * 2 + (i & 1);
        if (key >= seq_k || (T::kCausal && key > row)) s[mt][nt][i] = neg_inf();
      }
}

// Online softmax in the log2 domain with the scale folded in: turns s into unnormalised
// probabilities against the row's base (its running max), updates the running sum, and returns
// in alpha the factor by which the output accumulated so far must shrink. With LAZY_RESCALE the
// base rises only when a tile's max passes it by more than kLazyHeadroom (as in
// FlashAttention-4): probabilities then reach at most 2^8, which fp16 and the fp32 sums hold as
// exactly as ones below 1, and most tiles leave alpha at 1, so the rescale can be skipped.
// Returns whether the output must shrink: always without LAZY_RESCALE, else whether this thread
// raised a base.
constexpr float kLazyHeadroom = 8.f;
template <class T>
__device__ __forceinline__ bool online_softmax(float (&s)[T::kMTiles][T::kSTiles][4],
                                               float (&row_max)[T::kMTiles][2],
                                               float (&row_sum)[T::kMTiles][2],
                                               float (&alpha)[T::kMTiles][2], float scale_log2) {
  bool rescaled = false;
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = neg_inf();
#pragma unroll
      for (int nt = 0; nt < T::kSTiles; ++nt)
        mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float tile_max = mx * scale_log2;
      float new_max;
      if constexpr (T::kLazyRescale) {
        // A base of -inf (every key masked so far) rises to any finite max: -inf + 8 is -inf.
        const bool raise = tile_max > row_max[mt][h] + kLazyHeadroom;
        new_max = raise ? tile_max : row_max[mt][h];
        alpha[mt][h] = raise ? fast_exp2(row_max[mt][h] - new_max) : 1.f;
        rescaled |= raise;
      } else {
        new_max = fmaxf(row_max[mt][h], tile_max);
      }
      // A row with every key masked so far keeps max -inf; subtract 0 to avoid inf - inf.
      const float base = new_max == neg_inf() ? 0.f : new_max;
      if constexpr (!T::kLazyRescale) alpha[mt][h] = fast_exp2(row_max[mt][h] - base);
      row_max[mt][h] = new_max;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < T::kSTiles; ++nt) {
        s[mt][nt][2 * h] = fast_exp2(s[mt][nt][2 * h] * scale_log2 - base);
        s[mt][nt][2 * h + 1] = fast_exp2(s[mt][nt][2 * h + 1] * scale_log2 - base);
        if constexpr (!T::kRowSumMma) sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
      }
      // mma.sync: the sums ride with P*V, and rescale() shrinks them with the output.
      if constexpr (!T::kRowSumMma) row_sum[mt][h] = row_sum[mt][h] * alpha[mt][h] + sum;
    }
  return !T::kLazyRescale || rescaled;
}

template <class T>
__device__ __forceinline__ void rescale(float (&acc)[T::kMTiles][T::kOTiles][4],
                                        float (&row_sum_mma)[T::kMTiles][1][4],
                                        const float (&alpha)[T::kMTiles][2]) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt) {
      acc[mt][nt][0] *= alpha[mt][0];
      acc[mt][nt][1] *= alpha[mt][0];
      acc[mt][nt][2] *= alpha[mt][1];
      acc[mt][nt][3] *= alpha[mt][1];
    }
    if constexpr (T::kRowSumMma) {  // one column of each row half is enough: it is all that is read
      row_sum_mma[mt][0][0] *= alpha[mt][0];
      row_sum_mma[mt][0][2] *= alpha[mt][1];
    }
  }
}

}  // namespace fa
}  // namespace evo
