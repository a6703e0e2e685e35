#pragma once
// The TMA pipelines (schedules tma*, pingpong, qk_ahead*): one thread issues each tile as bulk
// tensor copies that land already swizzled and complete on an mbarrier, so the warps spend no
// instructions on addresses and wait on the barrier instead of a block-wide sync. The host
// describes Q, K and V once per call with tensor maps (tensor_maps.h).
//
// Refills: Pipeline::kTma refills a stage behind the block-wide barrier that ends the step which
// last read it; with one stage (kSplitRefill) K and V are refilled apart, K(t+1) as soon as
// QK^T(t) is done and V(t+1) once P*V(t) is. Pipeline::kTmaRelease drops that barrier: every
// warp counts itself out of a stage once it has read it, and the last one out refills it, so no
// warp waits for another. The calls are pipeline_copy.cuh's.
#include "block.cuh"
#include "ptx_tma.cuh"

namespace evo {
namespace fa {

template <class T>
struct PipelineTma {
  const Block<T>& b;
  // The barriers tile t's K and V complete on: K's and V's own with kSplitRefill and
  // kKvBarriers, else one per stage for both.
  static constexpr bool kOwnVBarrier = T::kSplitRefill || T::kKvBarriers;
  static constexpr unsigned kTileBytes = T::kKVElems * 2;

  __device__ __forceinline__ explicit PipelineTma(const Block<T>& block) : b(block) {}

  // The tensor maps and the mbarriers depend on no earlier grid, so one thread readies them
  // while the previous kernel may still run; the copies wait.
  __device__ __forceinline__ static void before_grid_wait(const FaParams& p,
                                                          const SharedLayout<T>& smem) {
    if (threadIdx.x == 0) {
      prepare_copies(p, smem);
      if constexpr (T::kStageRelease) {
#pragma unroll
        for (int i = 0; i < T::kStages; ++i) smem.left[i] = 0;
      }
      mbarrier_init_fence();
    }
  }

  // One thread: the maps into the copy engine's cache, and the barriers the copies complete on.
  __device__ __forceinline__ static void prepare_copies(const FaParams& p, const SharedLayout<T>& smem) {
    prefetch_tensor_map(p.q_map);
    prefetch_tensor_map(p.k_map);
    prefetch_tensor_map(p.v_map);
#pragma unroll
    for (int i = 0; i < T::kFullBarriers; ++i) mbarrier_init(&smem.full[i], 1);
  }

  __device__ __forceinline__ unsigned long long* k_bar(int t) const { return &b.smem.full[b.stage(t)]; }
  __device__ __forceinline__ unsigned long long* v_bar(int t) const {
    return kOwnVBarrier ? b.smem.full_v + b.stage(t) : &b.smem.full[b.stage(t)];
  }
  // The phase tile t's barriers complete in: the stage's (slot / STAGES)-th filling.
  __device__ __forceinline__ unsigned phase(int t) const { return (b.slot(t) / T::kStages) & 1; }
  __device__ __forceinline__ void expect_kv(int t) const {  // one thread
    if constexpr (kOwnVBarrier) {
      mbarrier_expect_bytes(k_bar(t), kTileBytes);
      mbarrier_expect_bytes(v_bar(t), kTileBytes);
    } else {
      mbarrier_expect_bytes(k_bar(t), 2 * kTileBytes);
    }
  }
  __device__ __forceinline__ void copy_k(int t) const {  // tile t's K into its stage
    tma_load_tile<T, T::kBlockN>(b.k_tiles + b.stage(t) * T::kKVElems, b.p.k_map,
                                 b.kv_map_row((b.first_tile + t) * T::kBlockN), b.kv_slice, k_bar(t));
  }
  __device__ __forceinline__ void copy_v(int t) const {
    if constexpr (T::kVTransposed) {
      tma_load_vt_tile<T>(b.v_tiles + b.stage(t) * T::kKVElems, b.p.v_map,
                          (b.first_tile + t) * T::kBlockN, b.kv_slice, v_bar(t));
    } else {
      tma_load_tile<T, T::kBlockN>(b.v_tiles + b.stage(t) * T::kKVElems, b.p.v_map,
                                   b.kv_map_row((b.first_tile + t) * T::kBlockN), b.kv_slice, v_bar(t));
    }
  }
  // kSplitRefill: K or V of tile t alone, into the one stage, each on its own barrier.
  __device__ __forceinline__ void load_k(int t) const {
    mbarrier_expect_bytes(k_bar(t), kTileBytes);
    copy_k(t);
  }
  __device__ __forceinline__ void load_v(int t) const {
    mbarrier_expect_bytes(v_bar(t), kTileBytes);
    copy_v(t);
  }
  __device__ __forceinline__ void load_kv(int t) const {  // one thread
    expect_kv(t);
    copy_k(t);
    copy_v(t);
  }

  // One thread tells every barrier what to expect, then issues the copies in the order they are
  // needed. (Sharing the copies out over the warps was slower: bench/NOTES.md.)
  __device__ __forceinline__ void prologue() const {
    if constexpr (T::kPackGqa) {
      // A group's rows span heads, which a box of the per-head tensor map cannot: every thread
      // loads Q, and the fence makes its stores visible to wgmma's (async proxy) reads.
      load_tile<T, T::kBlockM, false>(b.q_tile, b.q, b.q0_front, b.rows);
      fence_proxy_async();
    }
    __syncthreads();  // the barriers, initialised before the grid wait, are visible to every warp
    if (threadIdx.x == 0) {
      if constexpr (!T::kPackGqa)
        mbarrier_expect_bytes(b.smem.full_q, (T::kFold ? 2 : 1) * T::kQElems * 2);
#pragma unroll
      for (int t = 0; t < T::kPrologueTiles; ++t)
        if (t < b.n_tiles) expect_kv(t);
      if constexpr (!T::kPackGqa)
        tma_load_tile<T, T::kBlockM>(b.q_tile, b.p.q_map, b.q_map_row(b.q0_front), b.q_slice, b.smem.full_q);
      if constexpr (T::kFold)
        tma_load_tile<T, T::kBlockM>(b.q_tile + T::kQElems, b.p.q_map, b.q_map_row(b.q0_back), b.q_slice,
                                     b.smem.full_q);
#pragma unroll
      for (int t = 0; t < T::kPrologueTiles; ++t)
        if (t < b.n_tiles) {
          copy_k(t);
          copy_v(t);
        }
    }
  }

  // The copies due at the start of step t. The stage a refill overwrites was last read in the
  // previous step, before its closing barrier (STAGE_RELEASE refills in stage_read instead).
  __device__ __forceinline__ void refill(int t, bool first) const {
    if constexpr (T::kSplitRefill) {
      // P*V(t-1) is done (the previous step's closing barrier): V(t) may overwrite it.
      if (!first && threadIdx.x == 0) load_v(t);
    } else if (!T::kStageRelease && threadIdx.x == 0 && t + T::kPrefetch < b.n_tiles) {
      load_kv(t + T::kPrefetch);
    }
  }
  // (PACK_GQA: Q was loaded before the prologue's barrier.) A persistent block's Q tile is
  // loaded once per work tile.
  __device__ __forceinline__ void wait_q() const {
    if constexpr (T::kPersistent) {
      mbarrier_wait(b.smem.full_q, b.work & 1);
    } else if constexpr (!T::kPackGqa) {
      mbarrier_wait(b.smem.full_q, 0);
    }
  }
  __device__ __forceinline__ void wait_tile(int t) const { mbarrier_wait(k_bar(t), phase(t)); }

  // CAUSAL_FOLD: a warp whose keys are not visible does not wait for the tile (key group 0 of
  // the back rows needs every tile up to the block's end, so each copy is still waited for
  // before the block can leave). Skipping warps never wait on a later phase either: tiles only
  // go up in keys.
  __device__ __forceinline__ void acquire(int t, bool first, bool visible) const {
    refill(t, first);
    __syncwarp();
    if (visible) {
      if (first) wait_q();
      wait_tile(t);
    }
  }

  __device__ __forceinline__ void k_consumed(int t) const {
    if constexpr (T::kSplitRefill) {
      __syncthreads();  // every warpgroup is done with K(t)
      if (threadIdx.x == 0 && t + 1 < b.n_tiles) load_k(t + 1);
    }
  }
  __device__ __forceinline__ void wait_v(int t) const {
    if constexpr (kOwnVBarrier) mbarrier_wait(v_bar(t), phase(t));
  }

  // STAGE_RELEASE: the last of the block's warps to leave a stage refills it with tile
  // t + STAGES; the fences order every warp's reads of the stage before the copy that overwrites
  // it. Where no tile is left to refill it with, every warp skips the count alike: the atomic's
  // round trip would sit on each warp's path between tiles for nothing.
  __device__ __forceinline__ void stage_read(int t) const {
    if constexpr (T::kStageRelease) {
      if (b.lane == 0 && t + T::kStages < b.n_tiles) {
        __threadfence_block();
        const unsigned left_before = atomicAdd(&b.smem.left[t % T::kStages], 1u);
        if (left_before % T::kWarps == T::kWarps - 1) {
          __threadfence_block();
          load_kv(t + T::kStages);
        }
      }
    }
  }

  // Without STAGE_RELEASE the next step's copies may overwrite a stage read in step t: a
  // block-wide barrier, but only where that copy refills a stage that held an earlier tile
  // (always with kSplitRefill's one stage).
  __device__ __forceinline__ void end_step(int t) const {
    if constexpr (!T::kStageRelease) {
      const int next_fill = t + 1 + T::kPrefetch;
      if (T::kSplitRefill || (next_fill < b.n_tiles && next_fill >= T::kStages)) __syncthreads();
    }
  }

  __device__ __forceinline__ void drain() const {  // a split without keys: Q's copy is done
    wait_q();
    __syncthreads();
  }
};

}  // namespace fa
}  // namespace evo
