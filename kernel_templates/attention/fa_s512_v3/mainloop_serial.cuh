#pragma once
// Mainloop::kSerial (schedules sync, cp_async, tma, tma_release): each tile's QK^T, softmax and
// P*V one after the other, through mma.sync (Q held in registers for the whole loop) or wgmma
// (Q and K read from shared memory through descriptors, P from registers).
#include "block.cuh"
#include "gemms.cuh"
#include "softmax.cuh"

namespace evo {
namespace fa {

template <class T, class Pipe>
struct MainloopSerial {
  using Acc = float[T::kMTiles][T::kOTiles][4];
  // mma.sync: Q's A fragments, loaded at the first tile. (WGMMA reads Q from shared memory.)
  using QFrags = unsigned[T::kWgmma ? 1 : T::kMTiles][T::kWgmma ? 1 : T::kQkSteps][4];

  __device__ __forceinline__ static void run(const Pipe& pipe, const Block<T>& b, Acc& acc,
                                             Softmax<T>& softmax) {
    QFrags q_frag;
    // The first step is peeled off: with `first` a constant at each (inlined) call, what differs
    // for it costs no branch.
    if (b.n_tiles > 0) step(0, true, pipe, b, acc, softmax, q_frag);
    for (int t = 1; t < b.n_tiles; ++t) step(t, false, pipe, b, acc, softmax, q_frag);
  }

 private:
  __device__ __forceinline__ static void load_q_fragments(const Block<T>& b, QFrags& q_frag) {
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < T::kQkSteps; ++ks) {
        const int row = b.row_w + mt * 16 + (b.lane & 15);
        const int col = ks * 16 + (b.lane >> 4) * 8;
        ldmatrix_x4(q_frag[mt][ks], b.q_own() + tile_offset<T, T::kBlockM>(row, col));
      }
  }

  // The step's closing (pipe.end_step) stays outside the visibility branch: __syncthreads is
  // .aligned, so every warp must reach the same one (with a second one on the skipping path,
  // synccheck reported a divergent barrier).
  __device__ __forceinline__ static void step(int t, const bool first, const Pipe& pipe,
                                              const Block<T>& b, Acc& acc, Softmax<T>& softmax,
                                              QFrags& q_frag) {
    const bool visible = b.keys_visible(t);
    pipe.acquire(t, first, visible);
    if (visible) {
      if constexpr (!T::kWgmma) {
        if (first) load_q_fragments(b, q_frag);
      }
      const Element<T>* k_tile = b.k_stage(t);
      const Element<T>* v_tile = b.v_stage(t);

      float s[T::kMTiles][T::kSTiles][4];
      if constexpr (T::kWgmma) {
        wgmma_fence();
        issue_scores_wgmma<T>(s[0], b.q_tile, k_tile, b.row_wg, b.key_w);
        wgmma_wait<0>();
        fence_operands(s[0]);
        pipe.k_consumed(t);
      } else {
        scores_mma_sync<T>(s, q_frag, k_tile, b.key_w, b.lane);
      }

      float alpha[T::kMTiles][2];
      b.mask(t, s);
      [[maybe_unused]] const bool rescaled = softmax.online(s, alpha, b.scale_log2);
      if constexpr (T::kWaitVBeforePack) pipe.wait_v(t);
      // LAZY_RESCALE: the output shrinks only where some row of the warp raised its base, decided
      // per warp so that the branch is uniform; before the first tile there is nothing to shrink.
      if constexpr (T::kLazyRescale) {
        if (!first && __any_sync(0xffffffffu, rescaled)) softmax.rescale(acc, alpha);
      } else {
        softmax.rescale(acc, alpha);
      }

      // O += P V: P goes from the score registers straight into A fragments.
      if constexpr (T::kWgmma) {
        unsigned p_frag[T::kPvSteps][4];
#pragma unroll
        for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_frag[kk], s[0], kk);
        if constexpr (!T::kWaitVBeforePack) pipe.wait_v(t);
        wgmma_fence();
        issue_pv_wgmma<T>(acc[0], p_frag, v_tile, b.key_w);
        wgmma_wait<0>();
        fence_operands(acc[0]);
        fence_operands(p_frag);
      } else {
        if constexpr (!T::kWaitVBeforePack) pipe.wait_v(t);
        accumulate_pv_mma_sync<T>(acc, softmax.row_sum_mma, s, v_tile, b.key_w, b.lane);
      }
    }
    pipe.stage_read(t);
    pipe.end_step(t);
  }
};

}  // namespace fa
}  // namespace evo
