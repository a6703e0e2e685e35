#pragma once
// Pipeline::kTmaProducer (the warp-specialized schedules), as FlashAttention-3's: a warpgroup of
// its own past the computing warps issues every copy. Its first thread loads Q, then each tile's
// K and V into their stages as soon as the computing warps have freed them; the warpgroup then
// leaves, having lowered its registers so that the computing warpgroups can raise theirs.
//
// K and V are two pipelines over the same stage count, each with a full and an empty mbarrier per
// stage: a warp frees K(t)'s stage once QK^T(t) has read it (k_consumed) and V(t)'s once P*V(t)
// has (stage_read), which is a step later. So K(t + STAGES) is copied while tile t's softmax and
// the next step run, not only after P*V(t) retires, and two stages leave the copy of the next K
// more than a step to land. The producer issues K(t) before V(t-1), the order the computing warps
// need them in, so that neither waits behind the other's release. The computing warps wait for K
// on full[stage] and for V on full_v[stage], and never issue a copy or wait for one another
// between tiles. The copies are PipelineTma's.
#include "block.cuh"
#include "pipeline_tma.cuh"
#include "ptx_tma.cuh"

namespace evo {
namespace fa {

template <class T>
struct PipelineProducer : PipelineTma<T> {
  using Base = PipelineTma<T>;
  using Base::b;
  static_assert(Base::kOwnVBarrier, "K and V complete on barriers of their own");

  __device__ __forceinline__ explicit PipelineProducer(const Block<T>& block) : Base(block) {}

  __device__ __forceinline__ static void before_grid_wait(const FaParams& p, const SharedLayout<T>& smem) {
    if (threadIdx.x == 0) {
      Base::prepare_copies(p, smem);
#pragma unroll
      for (int i = 0; i < 2 * T::kStages; ++i) mbarrier_init(&smem.empty[i], T::kWarps);
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
    if (!computes) {
      if constexpr (T::kProducerRegs > 0) warpgroup_lower_registers<T::kProducerRegs>();
      if (threadIdx.x == T::kThreads) produce();
      return false;
    }
    if constexpr (T::kConsumerRegs > 0) warpgroup_raise_registers<T::kConsumerRegs>();
    return true;
  }

  // K(t) reuses the stage of K(t - STAGES) once every computing warp has freed it: the
  // (t / STAGES)-th phase of that stage's empty barrier; V likewise on its own.
  __device__ __forceinline__ unsigned long long* empty_k(int t) const { return &b.smem.empty[t % T::kStages]; }
  __device__ __forceinline__ unsigned long long* empty_v(int t) const {
    return &b.smem.empty[T::kStages + t % T::kStages];
  }
  __device__ __forceinline__ static void wait_free(unsigned long long* empty, int t) {
    if (t >= T::kStages) mbarrier_wait(empty, (t / T::kStages - 1) & 1);
  }
  __device__ __forceinline__ void produce() const {
    if constexpr (!T::kPackGqa) {
      mbarrier_expect_bytes(b.smem.full_q, T::kQElems * 2);
      tma_load_tile<T, T::kBlockM>(b.q_tile, b.p.q_map, b.q_map_row(b.q0_front), b.q_slice, b.smem.full_q);
    }
    for (int t = 0; t <= b.n_tiles; ++t) {
      if (t < b.n_tiles) {
        wait_free(empty_k(t), t);
        this->load_k(t);
      }
      if (t > 0) {
        wait_free(empty_v(t - 1), t - 1);
        this->load_v(t - 1);
      }
    }
  }

  __device__ __forceinline__ void acquire(int t, bool first, bool) const {
    __syncwarp();
    if (first) this->wait_q();
    this->wait_tile(t);
  }
  // The warp has read K(t) (QK^T(t) is done) or V(t) (P*V(t) is) for the last time: it frees
  // the stage where the producer still has a tile to put there (it waits for exactly those phases).
  __device__ __forceinline__ void free_stage(unsigned long long* empty, int t) const {
    __syncwarp();
    if (b.lane == 0 && t + T::kStages < b.n_tiles) mbarrier_arrive(empty);
  }
  __device__ __forceinline__ void k_consumed(int t) const { free_stage(empty_k(t), t); }
  __device__ __forceinline__ void stage_read(int t) const { free_stage(empty_v(t), t); }
  __device__ __forceinline__ void end_step(int) const {}

  __device__ __forceinline__ void drain() const {  // a sequence without keys: Q's copy is done
    this->wait_q();
    block_sync<T>();
  }
};

}  // namespace fa
}  // namespace evo
