#pragma once
// The online softmax of a warp's rows, which owns their state: the running max (the base the
// probabilities are taken against, in log2 units with the scale folded in) and the running sum.
#include "kernel_traits.cuh"
#include "ptx.cuh"

namespace evo {
namespace fa {

// With LAZY_RESCALE a row's base rises only when a tile's max passes it by more than this (as in
// FlashAttention-4): probabilities then reach at most 2^8, which the 16-bit P and the fp32 sums
// hold as exactly as values below 1, and most tiles leave the output unscaled.
constexpr float kLazyHeadroom = 8.f;

template <class T>
struct Softmax {
  float row_max[T::kMTiles][2];
  // Per thread (its 2 of every 8 keys) until finish(); under mma.sync the sums come from the
  // tensor cores instead, in row_sum_mma.
  float row_sum[T::kMTiles][2];
  // mma.sync: the rows' sums of P, accumulated by P*V itself as one more n8 block of output whose
  // B operand is all ones (gemms.cuh), so every column holds the sum. Unused under WGMMA.
  float row_sum_mma[T::kMTiles][1][4];

  __device__ __forceinline__ Softmax() {
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) row_sum_mma[mt][0][i] = 0.f;
      row_max[mt][0] = row_max[mt][1] = neg_inf();
      row_sum[mt][0] = row_sum[mt][1] = 0.f;
    }
  }

  // Turns the (masked) scores s into unnormalised probabilities against each row's base, adds
  // them to the running sums, and sets alpha to the factor the output accumulated so far must
  // shrink by. Returns whether the output must shrink: always without LAZY_RESCALE, else whether
  // this thread raised a base.
  __device__ __forceinline__ bool online(float (&s)[T::kMTiles][T::kSTiles][4],
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

  // The output accumulated so far (and, under mma.sync, the sums that ride with it) shrinks by
  // alpha.
  __device__ __forceinline__ void rescale(float (&acc)[T::kMTiles][T::kOTiles][4],
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
      if constexpr (T::kRowSumMma) {  // one column of each row half is all that is read
        row_sum_mma[mt][0][0] *= alpha[mt][0];
        row_sum_mma[mt][0][2] *= alpha[mt][1];
      }
    }
  }

  // The output's rows are acc / row_sum: dividing the sums by s multiplies them by s (e4m3: V's
  // scale, applied once here rather than to every element of V). Key groups and split blocks merge
  // sums divided alike.
  __device__ __forceinline__ void scale_output(float s) {
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) row_sum[mt][h] /= s;
  }

  // After the last tile: each row's whole sum over this warp's keys, in row_sum.
  __device__ __forceinline__ void finish() {
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (T::kRowSumMma) {
          row_sum[mt][h] = row_sum_mma[mt][0][2 * h];
        } else {
          float l = row_sum[mt][h];
          l += __shfl_xor_sync(0xffffffffu, l, 1);
          l += __shfl_xor_sync(0xffffffffu, l, 2);
          row_sum[mt][h] = l;
        }
      }
  }
};

}  // namespace fa
}  // namespace evo
