#pragma once
// Pipeline::kTmaProducer (the warp-specialized schedules), as FlashAttention-3's: a warpgroup of
// its own past the computing warps issues every copy. Its first thread loads Q, then each tile's
// K and V into their stage as soon as the computing warps have freed it; the warpgroup then
// leaves, having lowered its registers so that the computing warpgroups can raise theirs. The
// computing warps wait for a tile on the stage's full mbarrier and free it on its empty one, and
// never issue a copy or wait for one another between tiles. The copies are PipelineTma's.
//
// On two stages (KernelTraits::kKvBarriers) K and V are two pipelines over the stages, each with
// a full and an empty mbarrier a stage: a warp frees K(t) once QK^T(t) has read it (k_consumed)
// and V(t) once P*V(t) has (stage_read), a step later, so K(t + 2) is copied while tile t's
// softmax still runs, not only after P*V(t) has retired. The producer issues K(t) before V(t-1),
// the order the computing warps need them in, so that neither waits behind the other's release.
// On more stages a stage's K and V are copied and freed together (the plan says why).
#include "block.cuh"
#include "pipeline_tma.cuh"
#include "ptx_tma.cuh"

namespace evo {
namespace fa {

template <class T>
struct PipelineProducer : PipelineTma<T> {
  using Base = PipelineTma<T>;
  using Base::b;
  static constexpr bool kApart = Base::kOwnVBarrier;  // K and V copied and freed apart

  __device__ __forceinline__ explicit PipelineProducer(const Block<T>& block) : Base(block) {}

  __device__ __forceinline__ static void before_grid_wait(const FaParams& p, const SharedLayout<T>& smem) {
    if (threadIdx.x == 0) {
      Base::prepare_copies(p, smem);
#pragma unroll
      for (int i = 0; i < T::kEmptyBarriers; ++i) mbarrier_init(&smem.empty[i], T::kWarps);
      mbarrier_init_fence();
    }
  }

  // Every thread of the block: PACK_GQA's Q by plain loads of the computing threads (the fence
  // makes them visible to wgmma's reads), and the barrier after which every thread sees the
  // mbarriers initialised. Then the block splits: the producer warpgroup issues the copies and
  // leaves (false), the computing warps take their registers and go on (true).
  __device__ __forceinline__ bool prologue() const {
    const bool computes = threadIdx.x < T::kThreads;
    if constexpr (T::kPackGqa) {
      if (computes) {
        load_tile<T, T::kBlockM, false>(b.q_tile, b.q, b.q0_front, b.rows);
        fence_proxy_async();
      }
    }
    __syncthreads();
    if (!take_role(computes)) {
      if (threadIdx.x == T::kThreads) produce();
      return false;
    }
    return true;
  }

  // After the barrier that shows every thread the mbarriers: the producer warpgroup lowers its
  // registers (false), the computing warps raise theirs (true). (`computes` as the prologue
  // reads it once: reading threadIdx.x again here changed PACK_GQA's SASS.)
  __device__ __forceinline__ static bool take_role(bool computes) {
    if (!computes) {
      if constexpr (T::kProducerRegs > 0) warpgroup_lower_registers<T::kProducerRegs>();
      return false;
    }
    if constexpr (T::kConsumerRegs > 0) warpgroup_raise_registers<T::kConsumerRegs>();
    return true;
  }

  // Tile t reuses the stage of tile t - STAGES once every computing warp has freed it: the
  // (t / STAGES)-th phase of that stage's empty barrier (K's, or the stage's where K and V are
  // freed together; V's own where they are freed apart).
  __device__ __forceinline__ unsigned long long* k_empty(int t) const { return &b.smem.empty[b.stage(t)]; }
  __device__ __forceinline__ unsigned long long* v_empty(int t) const {
    return kApart ? &b.smem.empty[T::kStages + b.stage(t)] : k_empty(t);
  }
  // (One block per work tile: the tile's own index, spelled so, keeps the SASS of the kernels
  // from before persistent blocks byte for byte; reading it through Block::slot did not.)
  __device__ __forceinline__ void wait_free(unsigned long long* empty, int t) const {
    if constexpr (T::kPersistent) {
      wait_free_slot(empty, b.slot(t));
    } else {
      wait_free_slot(empty, t);
    }
  }
  __device__ __forceinline__ static void wait_free_slot(unsigned long long* empty, int slot) {
    if (slot >= T::kStages) mbarrier_wait(empty, (slot / T::kStages - 1) & 1);
  }
  // Q into its tile, once the previous work tile's last QK^T has read it (PERSISTENT).
  __device__ __forceinline__ void load_q() const {
    if constexpr (!T::kPackGqa) {
      if (T::kPersistent && b.work > 0) mbarrier_wait(b.smem.q_empty(), (b.work - 1) & 1);
      mbarrier_expect_bytes(b.smem.full_q, T::kQElems * 2);
      tma_load_tile<T, T::kBlockM>(b.q_tile, b.p.q_map, b.q_map_row(b.q0_front), b.q_slice, b.smem.full_q);
    }
  }
  // The block's copies, in the order the computing warps need them. A persistent block's first
  // K waits only for its stage, which the previous work tile frees before it frees Q.
  __device__ __forceinline__ void produce() const {
    if constexpr (!T::kPersistent) load_q();
    if constexpr (kApart) {
      for (int t = 0; t <= b.n_tiles; ++t) {
        if (t < b.n_tiles) {
          wait_free(k_empty(t), t);
          this->load_k(t);
        }
        if (T::kPersistent && t == 0) load_q();
        if (t > 0) {
          wait_free(v_empty(t - 1), t - 1);
          this->load_v(t - 1);
        }
      }
    } else {
      for (int t = 0; t < b.n_tiles; ++t) {
        // (The empty barrier named only where it is waited for, as before persistent blocks:
        // wait_free(k_empty(t), t) here changes the three- and four-stage blocks' SASS.)
        if (b.slot(t) >= T::kStages) mbarrier_wait(k_empty(t), (b.slot(t) / T::kStages - 1) & 1);
        this->load_kv(t);
        if (T::kPersistent && t == 0) load_q();
      }
    }
  }

  __device__ __forceinline__ void acquire(int t, bool first, bool) const {
    __syncwarp();
    if (first) this->wait_q();
    this->wait_tile(t);
  }
  // The warp has read K(t) (QK^T(t) is done) or V(t) (P*V(t) is; the stage's last reader where
  // K and V are freed together) for the last time: it frees the stage where the producer still
  // has a tile to put there (it waits for exactly those phases).
  // A persistent block's producer goes on into the next work tile's K/V and Q: every stage is freed,
  // and Q after the last QK^T, or (kQFreedAfterStore) by the epilogue once the output tile over it
  // has been stored (arrivals past the block's last work tile complete phases nobody waits for).
  __device__ __forceinline__ void free_stage(unsigned long long* empty, int t) const {
    __syncwarp();
    if (b.lane == 0 && (T::kPersistent || t + T::kStages < b.n_tiles)) mbarrier_arrive(empty);
  }
  __device__ __forceinline__ void k_consumed(int t) const {
    if constexpr (kApart) free_stage(k_empty(t), t);
    if constexpr (T::kPersistent && !T::kQFreedAfterStore) {
      if (t == b.n_tiles - 1) free_stage(b.smem.q_empty(), t);
    }
  }
  __device__ __forceinline__ void stage_read(int t) const { free_stage(v_empty(t), t); }
  __device__ __forceinline__ void end_step(int) const {}

  __device__ __forceinline__ void drain() const {  // a sequence without keys: Q's copy is done
    this->wait_q();
    block_sync<T>();
  }
};

}  // namespace fa
}  // namespace evo
