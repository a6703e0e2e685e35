#pragma once
// Mainloop::kQkAhead (schedules qk_ahead, qk_ahead_release): tile t+1's QK^T is issued in step t,
// beside P*V(t-1), so that the tensor cores work on both while tile t's softmax runs and no step
// waits for its own scores. The price is a second tile of scores in registers, and a step reads
// three stages: V(t-1) under the P*V in flight, V(t) for the next step's, and K(t+1) under the
// scores issued early (so STAGES >= 3). TMA pipelines only: a step waits for tile t+1 on its
// barrier.
#include "mainloop_pv_async.cuh"

namespace evo {
namespace fa {

template <class T, class Pipe>
struct MainloopQkAhead {
  static_assert(T::kWgmma && T::kTma && !T::kLazyRescale, "qk_ahead: wgmma, TMA, no lazy rescale");
  using Acc = float[T::kMTiles][T::kOTiles][4];
  using PFrags = unsigned[T::kPvSteps][4];
  using Scores = float[T::kMTiles][T::kSTiles][4];

  // Unrolled by two so that the score arrays swap roles without copies.
  __device__ __forceinline__ static void run(const Pipe& pipe, const Block<T>& b, Acc& acc,
                                             Softmax<T>& softmax) {
    PFrags p;
    Scores s_a, s_b;
    const int n = b.n_tiles;
    if (n == 1) {
      step(0, true, true, pipe, b, acc, softmax, s_a, s_b, p);
    } else if (n > 1) {
      step(0, true, false, pipe, b, acc, softmax, s_a, s_b, p);
      int t = 1;
      for (; t + 2 < n; t += 2) {
        step(t, false, false, pipe, b, acc, softmax, s_b, s_a, p);
        step(t + 1, false, false, pipe, b, acc, softmax, s_a, s_b, p);
      }
      if (t + 1 < n) {
        step(t, false, false, pipe, b, acc, softmax, s_b, s_a, p);
        step(t + 1, false, true, pipe, b, acc, softmax, s_a, s_b, p);
      } else {
        step(t, false, true, pipe, b, acc, softmax, s_b, s_a, p);
      }
    }
    finish_last_pv(b, acc, p);
  }

 private:
  // s holds tile t's scores (issued one step earlier), s_next receives tile t+1's; p holds the
  // previous tile's P on entry and this tile's on exit. Groups retire in order, so each wait
  // names how many of the newest may stay in flight.
  __device__ __forceinline__ static void step(int t, const bool first, const bool last,
                                              const Pipe& pipe, const Block<T>& b, Acc& acc,
                                              Softmax<T>& softmax, Scores& s, Scores& s_next,
                                              PFrags& p) {
    pipe.refill(t, first);
    __syncwarp();
    const Element<T>* k_next = b.k_stage(t + 1);
    if (first) {
      // Nothing to overlap yet: QK^T(0) alone, and QK^T(1) after the first softmax (waiting for
      // tile 1 before it would hold the first softmax for that tile's copy).
      pipe.wait_q();
      pipe.wait_tile(0);
      wgmma_fence();
      issue_scores_wgmma<T>(s[0], b.q_tile, b.k_tiles, b.row_wg, b.key_w);
      wgmma_wait<0>();
      fence_operands(s[0]);
    } else {
      wgmma_fence();
      issue_pv_wgmma<T>(acc[0], p, b.v_stage(t - 1), b.key_w);
      if (!last) {
        pipe.wait_tile(t + 1);
        issue_scores_wgmma<T>(s_next[0], b.q_tile, k_next, b.row_wg, b.key_w);
      }
      // In flight: QK^T(t), P*V(t-1) and (not last) QK^T(t+1); the first is needed now.
      if (last) {
        wgmma_wait<1>();
      } else {
        wgmma_wait<2>();
      }
      fence_operands(s[0]);
    }
    float alpha[T::kMTiles][2];
    b.mask(t, s);
    softmax.online(s, alpha, b.scale_log2);
    if (first) {
      if (!last) {
        pipe.wait_tile(1);
        wgmma_fence();
        issue_scores_wgmma<T>(s_next[0], b.q_tile, k_next, b.row_wg, b.key_w);
      }
    } else {
      // P*V(t-1) must be done; QK^T(t+1), issued after it, may still run.
      if (last) {
        wgmma_wait<0>();
      } else {
        wgmma_wait<1>();
      }
      fence_operands(acc[0]);
      fence_operands(p);
      pipe.stage_read(t - 1);
    }
    softmax.rescale(acc, alpha);
#pragma unroll
    for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p[kk], s[0], kk);
    pipe.end_step(t);
  }
};

}  // namespace fa
}  // namespace evo
