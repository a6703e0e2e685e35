#pragma once
// The pipelines in which every thread copies (schedules sync, cp_async, cp_async_pv): each K/V
// tile is loaded by the whole block into its stage, cp.async groups keep STAGES - 1 tiles (one
// fewer with P*V in flight) in flight, and a block-wide barrier stands between a tile's copy and
// its first reader.
//
// A pipeline is what a mainloop calls around each tile t:
//   prologue()                 Q and the first tiles, before the loop
//   acquire(t, first, visible) tile t (and on the first, Q) has landed for this warp
//   refill(t, first)           the copies due at the start of step t (TMA pipelines only)
//   wait_tile(t), wait_q()     TMA pipelines only
//   k_consumed(t)              QK^T(t) is done reading K(t)
//   wait_v(t)                  V(t) has landed, where it lands apart from K(t)
//   stage_read(t)              this warp has read tile t's stage for the last time
//   end_step(t)                what ends step t (a barrier where the next copy reuses a stage)
//   drain()                    after the loop, for a block with no tile: its copies are done
#include "block.cuh"

namespace evo {
namespace fa {

template <class T>
struct PipelineCopy {
  const Block<T>& b;

  __device__ __forceinline__ explicit PipelineCopy(const Block<T>& block) : b(block) {}
  __device__ __forceinline__ static void before_grid_wait(const FaParams&, const SharedLayout<T>&) {}

  __device__ __forceinline__ void load_kv(int t) const {  // tile t into its stage, every thread
    const int stage = t % T::kStages;
    const int n0 = (b.first_tile + t) * T::kBlockN;
    load_tile<T, T::kBlockN>(b.k_tiles + stage * T::kKVElems, b.k, n0, b.seq_k(), b.kv_stride());
    load_tile<T, T::kBlockN>(b.v_tiles + stage * T::kKVElems, b.v, n0, b.seq_k(), b.kv_stride());
  }

  // Q, then (cp.async) the first kPrefetch K/V tiles, each its own group.
  __device__ __forceinline__ void prologue() const {
    load_tile<T, T::kBlockM>(b.q_tile, b.q, b.q0_front, b.rows, b.q_stride());
    if constexpr (T::kFold)
      load_tile<T, T::kBlockM>(b.q_tile + T::kQElems, b.q, b.q0_back, b.rows, b.q_stride());
    if constexpr (T::kCpAsync) {
      cp_async_commit();
#pragma unroll
      for (int t = 0; t < T::kPrefetch; ++t) {
        if (t < b.n_tiles) load_kv(t);
        cp_async_commit();
      }
    }
  }

  // Tile t + kPrefetch starts its copy and tile t must have landed; the barrier makes every
  // thread's copies visible (and, before a wgmma reads them, to the async proxy).
  __device__ __forceinline__ void acquire(int t, bool, bool) const {
    if constexpr (T::kCpAsync) {
      if (t + T::kPrefetch < b.n_tiles) load_kv(t + T::kPrefetch);
      cp_async_commit();
      cp_async_wait<T::kPrefetch>();
      if constexpr (T::kWgmma) fence_proxy_async();
    } else {
      load_kv(t);
    }
    __syncthreads();
  }

  __device__ __forceinline__ void k_consumed(int) const {}
  __device__ __forceinline__ void wait_v(int) const {}
  __device__ __forceinline__ void stage_read(int) const {}

  // The next step's copy may overwrite a stage read in step t: a block-wide barrier, but only
  // where that copy refills a stage that held an earlier tile. Where the stages hold every tile
  // no barrier stands between the tiles, and the warps drift apart until the one after the loop.
  __device__ __forceinline__ void end_step(int t) const {
    const int next_fill = t + 1 + T::kPrefetch;
    if (next_fill < b.n_tiles && next_fill >= T::kStages) __syncthreads();
  }

  __device__ __forceinline__ void drain() const {
    if constexpr (T::kCpAsync) cp_async_wait<0>();
    __syncthreads();
  }
};

}  // namespace fa
}  // namespace evo
