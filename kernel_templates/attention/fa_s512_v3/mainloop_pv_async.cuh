#pragma once
// Mainloop::kPvAsync (schedules cp_async_pv, tma_pv, tma_release_pv; and, with turns, pingpong):
// wgmma only. A tile's P*V is left in flight on the tensor cores while the next tile's QK^T is
// issued beside it and its softmax runs; each step then waits for the previous P*V before it
// rescales the output. The pipeline holds one stage more than it copies ahead: V(t-1), which
// that P*V still reads.
#include "block.cuh"
#include "gemms.cuh"
#include "softmax.cuh"

namespace evo {
namespace fa {

// A warpgroup that has the tensor cores to itself: no turns to take.
struct NoTurns {
  template <class B>
  __device__ __forceinline__ static void start(const B&) {}
  template <class B>
  __device__ __forceinline__ static void take(const B&) {}
  template <class B>
  __device__ __forceinline__ static void give(const B&, int) {}
};

// The last tile's P*V, after the loop. A split without keys issues one too, so that no wgmma
// sits on a divergent path, and then discards what it read from a stage that was never filled.
template <class T, class PFrags>
__device__ __forceinline__ void finish_last_pv(const Block<T>& b,
                                               float (&acc)[T::kMTiles][T::kOTiles][4],
                                               PFrags& p_last) {
  wgmma_fence();
  issue_pv_wgmma<T>(acc[0], p_last, b.v_stage(b.n_tiles + T::kStages - 1), b.key_w);
  wgmma_wait<0>();
  fence_operands(acc[0]);
  fence_operands(p_last);
  if (b.n_tiles == 0) {
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[0][nt][i] = 0.f;
  }
}

template <class T, class Pipe, class Turns = NoTurns>
struct MainloopPvAsync {
  static_assert(T::kWgmma && !T::kFold, "P*V in flight: wgmma, not folded");
  using Acc = float[T::kMTiles][T::kOTiles][4];
  using PFrags = unsigned[T::kPvSteps][4];

  // The previous tile's P, whose P*V is still in flight, is in p_a; with two P sets (kPBuffers)
  // the tiles alternate between p_a and p_b, unrolled by two so that the sets swap roles without
  // copies, and the last one's ends in p_a.
  __device__ __forceinline__ static void run(const Pipe& pipe, const Block<T>& b, Acc& acc,
                                             Softmax<T>& softmax) {
    PFrags p_a, p_b;
    Turns::start(b);
    if constexpr (T::kPBuffers == 2) {
      if (b.n_tiles > 0) step(0, true, pipe, b, acc, softmax, p_b, p_a);
      int t = 1;
      for (; t + 1 < b.n_tiles; t += 2) {
        step(t, false, pipe, b, acc, softmax, p_a, p_b);
        step(t + 1, false, pipe, b, acc, softmax, p_b, p_a);
      }
      if (t < b.n_tiles) {  // an odd last tile: its P into p_a (registers only: no wgmma on a branch)
        step(t, false, pipe, b, acc, softmax, p_a, p_b);
#pragma unroll
        for (int kk = 0; kk < T::kPvSteps; ++kk)
#pragma unroll
          for (int i = 0; i < 4; ++i) p_a[kk][i] = p_b[kk][i];
      }
    } else {
      if (b.n_tiles > 0) step(0, true, pipe, b, acc, softmax, p_a, p_a);
      for (int t = 1; t < b.n_tiles; ++t) step(t, false, pipe, b, acc, softmax, p_a, p_a);
    }
    if (b.n_tiles > 0) pipe.wait_v(b.n_tiles - 1);
    finish_last_pv(b, acc, p_a);
    // A persistent block's next work tile takes the last tile's stage: free it too.
    if constexpr (T::kPersistent) pipe.stage_read(b.n_tiles - 1);
  }

 private:
  // p_prev holds the previous tile's P, p_this receives this tile's: the same set with one P set.
  __device__ __forceinline__ static void step(int t, const bool first, const Pipe& pipe,
                                              const Block<T>& b, Acc& acc, Softmax<T>& softmax,
                                              PFrags& p_prev, PFrags& p_this) {
    pipe.acquire(t, first, true);
    const bool pv_in_flight = !first;
    if (pv_in_flight) pipe.wait_v(t - 1);  // where V lands apart from K (the producer's)

    // S = Q K^T beside the previous tile's P*V.
    float s[T::kMTiles][T::kSTiles][4];
    Turns::take(b);
    wgmma_fence();
    issue_scores_wgmma<T>(s[0], b.q_tile, b.k_stage(t), b.row_wg, b.key_w);
    if (pv_in_flight) issue_pv_wgmma<T>(acc[0], p_prev, b.v_stage(t - 1), b.key_w);
    Turns::give(b, t);
    if (pv_in_flight) {
      wgmma_wait<1>();  // groups retire in order: the scores are done
    } else {
      wgmma_wait<0>();
    }
    fence_operands(s[0]);
    pipe.k_consumed(t);

    float alpha[T::kMTiles][2];
    b.mask(t, s);
    [[maybe_unused]] const bool rescaled = softmax.online(s, alpha, b.scale_log2);
    // Two P sets: this tile's P is packed now, into registers no P*V reads, and pinned here so
    // that the packing is not moved after the wait below.
    if constexpr (T::kPBuffers == 2) {
#pragma unroll
      for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_this[kk], s[0], kk);
      fence_operands(p_this);
    }
    // The wait stands outside LAZY_RESCALE's branch below: wgmma.wait_group is .aligned, so every
    // warp of the warpgroup must reach the same one, and that branch is decided per warp
    // (synccheck's "warpgroup MMA sequence error" otherwise, once the rows of one warpgroup's
    // warps raise their bases apart).
    if (pv_in_flight) {
      wgmma_wait<0>();
      fence_operands(acc[0]);
      fence_operands(p_prev);
    }
    // LAZY_RESCALE: the output shrinks only where some row of the warp raised its base, decided
    // per warp so that the branch is uniform; before the first tile there is nothing to shrink.
    if constexpr (T::kLazyRescale) {
      if (!first && __any_sync(0xffffffffu, rescaled)) softmax.rescale(acc, alpha);
    }
    // The previous tile's V was its stage's last reader (its K was read before, and freed
    // there where K and V are freed apart).
    if (pv_in_flight) pipe.stage_read(t - 1);
    if constexpr (!T::kLazyRescale) softmax.rescale(acc, alpha);
    if constexpr (T::kPBuffers == 1) {
#pragma unroll
      for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_this[kk], s[0], kk);
    }
    pipe.end_step(t);
  }
};

}  // namespace fa
}  // namespace evo
