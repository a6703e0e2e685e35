#pragma once
// The two GEMMs of one K/V tile, S = Q K^T and O += P V, through mma.sync or wgmma, and the
// mask between them. The softmax is softmax.cuh's; the order of it all is the mainloop's.
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
    const Element<T>* k_tile, int key_w, int lane) {
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
        mma_16816<T::kDType>(s[mt][2 * np], q_frag[mt][ks], b[0], b[1]);
        mma_16816<T::kDType>(s[mt][2 * np + 1], q_frag[mt][ks], b[2], b[3]);
      }
    }
}

// S = Q K^T for the warpgroup's 64 rows: one chain of kQkSteps wgmmas (32 bytes of the head dim
// each), issued and committed as one group but not waited for. The first overwrites s.
template <class T>
__device__ __forceinline__ void issue_scores_wgmma(float (&s)[T::kSTiles][4], const Element<T>* q_tile,
                                                   const Element<T>* k_tile, int row_wg, int key_w) {
  constexpr int kP = T::kQkPanel;
  const unsigned long long q_desc = smem_desc<kP>(q_tile + tile_offset<T, T::kBlockM, kP>(row_wg, 0), 16);
  const unsigned long long k_desc =
      per_iteration<T>(smem_desc<kP>(k_tile + tile_offset<T, T::kBlockN, kP>(key_w, 0), 16));
#pragma unroll
  for (int ks = 0; ks < T::kQkSteps; ++ks)
    Wgmma<T::kKeysPerWarp, T::kDType>::ss(s, q_desc + (tile_offset<T, T::kBlockM, kP>(0, ks * 16) >> 3),
                                          k_desc + (tile_offset<T, T::kBlockN, kP>(0, ks * 16) >> 3), ks > 0);
  wgmma_commit();
}

// e4m3: P's A fragment of one k32 step (m16n8k32: register j holds 4 consecutive columns, 4q..4q+3
// of the step's first 16 (j = 0, 1) or last 16 (j = 2, 3), of row r (j even) or r + 8, q = lane %
// 4). The scores' layout gives lane q keys 2q, 2q+1, 2q+8 and 2q+9 of each 16, and V^T holds each
// 16 keys in that order (fp8.h, e4m3_vt_column), so each lane rounds and packs its own scores of
// n8 tiles 2h and 2h + 1 as they are, with no exchange between lanes.
template <class T>
__device__ __forceinline__ void pack_p_e4m3(unsigned (&a)[4], const float (&s)[T::kSTiles][4], int kk) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {  // keys 0-15 of the step (tiles 0, 1), then 16-31
    const float (&t0)[4] = s[4 * kk + 2 * half];
    const float (&t1)[4] = s[4 * kk + 2 * half + 1];
    a[2 * half] = pack2_e4m3(t0[0], t0[1]) | (pack2_e4m3(t1[0], t1[1]) << 16);
    a[2 * half + 1] = pack2_e4m3(t0[2], t0[3]) | (pack2_e4m3(t1[2], t1[3]) << 16);
  }
}

// P as the A fragments of P*V: the fp32 scores of each k-step of keys, rounded to the element type
// (pairs of 16-bit values as m16n8k16 wants them, or e4m3 through pack_p_e4m3).
template <class T>
__device__ __forceinline__ void pack_p(unsigned (&a)[4], const float (&s)[T::kSTiles][4], int kk) {
  if constexpr (T::kDType == DType::kE4M3) {
    pack_p_e4m3<T>(a, s, kk);
  } else {
    a[0] = pack2<T::kDType>(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack2<T::kDType>(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack2<T::kDType>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack2<T::kDType>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// O += P V through mma.sync, V fragments by transposing ldmatrix, and the rows' sums of P into
// every column of `row_sum_mma` (B all ones).
template <class T>
__device__ __forceinline__ void accumulate_pv_mma_sync(float (&acc)[T::kMTiles][T::kOTiles][4],
                                                       float (&row_sum_mma)[T::kMTiles][1][4],
                                                       const float (&s)[T::kMTiles][T::kSTiles][4],
                                                       const Element<T>* v_tile, int key_w, int lane) {
  constexpr unsigned kOnes = kOnes2<T::kDType>;  // a B fragment of ones
#pragma unroll
  for (int kk = 0; kk < T::kPvSteps; ++kk) {
    unsigned a[T::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt) pack_p<T>(a[mt], s[mt], kk);
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
      mma_16816<T::kDType>(row_sum_mma[mt][0], a[mt], kOnes, kOnes);
#pragma unroll
    for (int dp = 0; dp < T::kOTiles / 2; ++dp) {
      unsigned b[4];
      const int key = key_w + kk * 16 + (lane & 15);
      const int col = dp * 16 + (lane >> 4) * 8;
      ldmatrix_x4_trans(b, v_tile + tile_offset<T, T::kBlockN>(key, col));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816<T::kDType>(acc[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816<T::kDType>(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O += P V for the warpgroup: P from registers, V through a descriptor, committed as one group
// and not waited for. 16-bit V: head dim contiguous (N-major), a 128-wide head dim spanning two
// panels. e4m3: V^T, keys contiguous (K-major) in panels of 64 keys, each k32 step half a panel.
template <class T>
__device__ __forceinline__ void issue_pv_wgmma(float (&acc)[T::kOTiles][4],
                                               const unsigned (&p_frag)[T::kPvSteps][4],
                                               const Element<T>* v_tile, int key_w) {
  if constexpr (T::kVTransposed) {
    constexpr int kP = T::kVtPanel;
#pragma unroll
    for (int kk = 0; kk < T::kPvSteps; ++kk)
      Wgmma<T::kHeadDim, T::kDType>::rs(
          acc, p_frag[kk],
          per_iteration<T>(smem_desc<kP>(v_tile + tile_offset<T, T::kHeadDim, kP>(0, key_w / 2 + kk * 16), 16)));
  } else {
    const unsigned long long v_desc = per_iteration<T>(
        smem_desc(v_tile + tile_offset<T, T::kBlockN>(key_w, 0), T::kBlockN * 64 * 2));
#pragma unroll
    for (int kk = 0; kk < T::kPvSteps; ++kk)
      Wgmma<T::kHeadDim, T::kDType>::rs(acc, p_frag[kk], v_desc + (tile_offset<T, T::kBlockN>(kk * 16, 0) >> 3));
  }
  wgmma_commit();
}

// Masks keys past the sequence end and (causal) above the diagonal: row r sees keys up to its
// position plus causal_shift, its position being r, or (PACK_GQA, the rows of a group's heads
// one after the other) r % seq_q.
template <class T>
__device__ __forceinline__ void mask_scores(float (&s)[T::kMTiles][T::kSTiles][4], int row0,
                                            int key0, int seq_k, int causal_shift, int seq_q,
                                            int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kSTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + mt * 16 + (lane >> 2) + (i >= 2 ? 8 : 0);
        const int last_key = (T::kPackGqa ? row % seq_q : row) + causal_shift;
        const int key = key0 + nt * 8 + (lane & 3) * 2 + (i & 1);
        if (key >= seq_k || (T::kCausal && key > last_key)) s[mt][nt][i] = neg_inf();
      }
}

}  // namespace fa
}  // namespace evo
