// fa_s512_v3: FlashAttention-2-style forward, 16-bit Q/K/V/O (fp16 or bf16: DTYPE), fp32
// accumulation and online softmax. Layout [batch, heads, seq, head_dim], contiguous. Compiled at
// run time by NVRTC (one instantiation per genome and problem), and exported by `evoctl export`,
// as one text that includes nothing beyond the CUDA toolkit's headers: the build inlines the
// pieces in this folder and the family's (../) into it (cmake/EmbedText.cmake).
//
// A packed batch (VARLEN, the problem's: FlashAttention's varlen layout): Q and O [total_q, heads,
// head_dim], K and V [total_k, heads_kv, head_dim], sequence b at the rows cu_seqlens[b] ..
// cu_seqlens[b + 1]; the grid covers the longest sequence, and each block finds its sequence's
// rows and lengths there (block.cuh).
//
// Grouped-query attention: K and V have heads_kv heads, and query head h reads K/V head
// h / (heads / heads_kv); with PACK_GQA = 1 a block's rows come from the whole group of query
// heads that shares a K/V head, so each K/V tile is read once for the group (a decode step's
// one row per head fills a tile). Causal masks align the diagonal bottom-right: query row i sees keys up
// to i + seq_k - seq_q (top-left and bottom-right agree for equal lengths).
//
// Work split: a block owns BLOCK_M query rows of one (batch, head). Its warps form a
// WARPS_M x WARPS_KV grid: WARPS_M = min(WARPS, BLOCK_M/16) warps split the rows, and the remaining
// WARPS_KV split the keys of every K/V tile. Each warp keeps its own running max, sum and output
// accumulator over its keys (online softmax is exact over any partition of the keys); the
// partial results merge once, through shared memory, at the end. With SPLIT_KV > 1 that many
// blocks share one row tile, each taking a slice of the keys: up to 8 form a cluster (sm_90) and
// merge their partial results through distributed shared memory; 16 leave theirs in the
// workspace, where the last to finish merges them.
//
// The kernel is a pipeline, a mainloop and an epilogue, as in CUTLASS and FlashAttention-3:
//   - the SCHEDULE gene (schedule.cuh) picks the pipeline that brings K/V tiles into
//     shared memory (pipeline_copy.cuh: plain loads or cp.async; pipeline_tma.cuh: bulk tensor
//     copies on mbarriers, refilled behind a barrier or by the last warp to leave a stage;
//     pipeline_producer.cuh: a producer warpgroup of its own issuing them, warp-specialized) and
//     the mainloop that orders each tile's QK^T, softmax and P*V (mainloop_serial.cuh,
//     mainloop_pv_async.cuh, mainloop_pingpong.cuh, mainloop_qk_ahead.cuh);
//   - WGMMA = 1 (sm_90a) swaps the tensor-core instructions (gemms.cuh): each warpgroup owns 64
//     query rows, Q and K are read through shared-memory descriptors from 128-byte-swizzled
//     tiles, P from registers. The accumulators have the same per-warp layout as m16n8k16 ones,
//     so masking, the softmax (softmax.cuh) and the epilogue (epilogue.cuh) are shared;
//   - LAZY_RESCALE = 1 raises a row's softmax base only when a tile's max passes it by more than
//     2^8 (softmax.cuh), so most tiles skip shrinking the output (a warp-uniform branch);
//   - CAUSAL_FOLD = 1 (mma.sync, causal calls) gives each block half a block of rows from the
//     start of the sequence and half from its end, so that every block sees about as many keys;
//     each warp skips the key ranges wholly above its rows and masks only the one its diagonal
//     crosses (block.cuh). Non-causal calls run as without it.
// Under mma.sync each row's probabilities are summed on the tensor cores, as one more n8 column
// block of O += P V whose B operand is all ones, instead of an add per score (the loop is paced
// by its instruction count more than by any unit); under WGMMA that extra wgmma costs more than
// it saves. bench/NOTES.md has what each choice was measured to gain.
#include "../params.h"
#include "kernel_traits.cuh"
#include "ptx.cuh"
#include "ptx_wgmma.cuh"
#include "ptx_tma.cuh"
#include "ptx_cluster.cuh"
#include "smem_tiles.cuh"
#include "gemms.cuh"
#include "softmax.cuh"
#include "block.cuh"
#include "pipeline_copy.cuh"
#include "pipeline_tma.cuh"
#include "pipeline_producer.cuh"
#include "mainloop_serial.cuh"
#include "mainloop_pv_async.cuh"
#include "mainloop_pingpong.cuh"
#include "mainloop_qk_ahead.cuh"
#include "epilogue.cuh"

namespace evo {
namespace fa {

template <class T, Pipeline kPipeline = T::kPipeline>
struct PipelineFor {
  using type = PipelineCopy<T>;
};
template <class T>
struct PipelineFor<T, Pipeline::kTma> {
  using type = PipelineTma<T>;
};
template <class T>
struct PipelineFor<T, Pipeline::kTmaRelease> {
  using type = PipelineTma<T>;
};
template <class T>
struct PipelineFor<T, Pipeline::kTmaProducer> {
  using type = PipelineProducer<T>;
};

template <class T, class Pipe>
__device__ __forceinline__ void run_mainloop(const Pipe& pipe, const Block<T>& b,
                                             float (&acc)[T::kMTiles][T::kOTiles][4],
                                             Softmax<T>& softmax) {
  if constexpr (T::kMainloop == Mainloop::kSerial) {
    MainloopSerial<T, Pipe>::run(pipe, b, acc, softmax);
  } else if constexpr (T::kMainloop == Mainloop::kPvAsync) {
    MainloopPvAsync<T, Pipe>::run(pipe, b, acc, softmax);
  } else if constexpr (T::kMainloop == Mainloop::kPingpong) {
    MainloopPingpong<T, Pipe>::run(pipe, b, acc, softmax);
  } else {
    MainloopQkAhead<T, Pipe>::run(pipe, b, acc, softmax);
  }
}

// Key group 0's rows, merged with the other key groups' and (SPLIT_KV) the split's, out to O.
template <class T>
__device__ __forceinline__ void epilogue(const Block<T>& b, float (&acc)[T::kMTiles][T::kOTiles][4],
                                         Softmax<T>& softmax) {
  if constexpr (T::kWarpsKV > 1)
    merge_key_groups<T>(b.smem.base, acc, softmax.row_max, softmax.row_sum, b.warp_m, b.warp_kv,
                        b.lane);
  // The output tile overlays Q (kTmaStore's: the merge buffer's end), which the last step's
  // barrier has released, or lies past the stages (the plan's epilogue_apart).
  if constexpr (T::kTmaStore) {
    // PERSISTENT with the tile apart: it stays the output's until the previous work tile's store
    // has read it, which thread 0 waited for before it went on.
    if constexpr (T::kPersistent && T::kEpilogueApart)
      if (b.work > 0) named_barrier_sync(kOutputBarrier, T::kWarpsM * 32);
    store_output_tma<T>(b.smem.base, b.p, b.m0, (int)b.bh, acc, softmax.row_sum, b.row_w,
                        b.warp_kv, b.lane);
    // PERSISTENT with the tile over Q: Q's bytes are free for the next work tile's once thread 0
    // has seen the store read them.
    if constexpr (T::kQFreedAfterStore) {
      named_barrier_sync(kOutputBarrier, T::kWarpsM * 32);
      if (b.lane == 0) mbarrier_arrive(b.smem.q_empty());
    }
  } else if constexpr (T::kSplitKV == 1) {
    // (Under mma.sync, the only path CAUSAL_FOLD takes, each warp stores its own rows.)
    store_output<T>(b.smem.base, b.o, b.q_stride(), b.q0_own, b.rows, acc, softmax.row_sum, b.row_w,
                    b.warp_kv, b.lane);
  } else if constexpr (T::kSplitInMemory) {
    merge_in_memory_and_store<T>(b.p.workspace, b.o, b.q_stride(), b.m0, b.rows, acc, softmax.row_max,
                                 softmax.row_sum, b.warp_m, b.row_w, b.warp_kv, b.lane);
  } else {
    merge_cluster_and_store<T>(b.smem.base, b.o, b.q_stride(), b.m0, b.rows, acc, softmax.row_max,
                               softmax.row_sum, b.warp_m, b.row_w, b.warp_kv, b.lane);
  }
}

// One work tile's mainloop and epilogue, by the computing warps, once its pipeline is under way.
template <class T, class Pipe>
__device__ __forceinline__ void compute_tile(const Pipe& pipe, const Block<T>& b) {
  float acc[T::kMTiles][T::kOTiles][4];
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
  Softmax<T> softmax;
  run_mainloop<T>(pipe, b, acc, softmax);
  // The next kernel's blocks are let in once every block of this grid has read its last keys (or
  // left), and they then wait for this grid's end before they touch memory: their start-up runs
  // under this grid's epilogue, and they take no place on an SM while this grid still loads.
  if constexpr (!T::kPersistent) allow_dependent_launch();

  // No barrier ended the last tile: every warp must be done with Q and the stages before the
  // epilogue's buffers overlay them (unless the plan put those apart).
  if constexpr (!T::kEpilogueApart) block_sync<T>();
  if (b.n_tiles == 0) pipe.drain();  // a split without keys: nothing waited for its copies yet
  softmax.finish();
  if constexpr (T::kDType == DType::kE4M3) softmax.scale_output(b.v_scale);
  epilogue<T>(b, acc, softmax);
}

// PERSISTENT: the producer's first thread issues the copies of every work tile of the block in
// turn, into stages and a Q tile that run on from one work tile to the next, while the computing
// warps work through the same tiles; a work tile's epilogue thus runs beside the next one's first
// copies. (FlashAttention-3's persistent kernel, with its static tile order.)
template <class T>
__device__ __forceinline__ void forward_persistent(const FaParams& p, const SharedLayout<T>& smem) {
  using Pipe = PipelineProducer<T>;
  static_assert(T::kProducer && !T::kPackGqa && !T::kVarlen && T::kSplitKV == 1, "the plan's rule");
  const PersistentWork work = PersistentWork::of<T>(p);
  __syncthreads();  // the mbarriers, initialised before the grid wait, are visible to every warp
  // Two loops over the same work tiles, one a role: ptxas gives each its own register count.
  int iter = 0, n = 0;
  if (!Pipe::take_role(threadIdx.x < T::kThreads)) {
    if (threadIdx.x != T::kThreads) return;
    for (int w = (int)blockIdx.x; w < work.total; w += (int)gridDim.x, ++n) {
      const Block<T> b(p, smem, &work, w, iter, n);
      Pipe(b).produce();
      iter += b.n_tiles;
    }
    return;
  }
  for (int w = (int)blockIdx.x; w < work.total; w += (int)gridDim.x, ++n) {
    const Block<T> b(p, smem, &work, w, iter, n);
    compute_tile<T>(Pipe(b), b);
    iter += b.n_tiles;
  }
  allow_dependent_launch();
}

template <class T>
__device__ __forceinline__ void forward(const FaParams& p) {
  using Pipe = typename PipelineFor<T>::type;
  // The wait for the previous grid comes before anything is computed that would live across it
  // (index arithmetic placed before it costs registers and spills); only TMA's set-up, which
  // leaves nothing in registers, runs ahead of it.
  if constexpr (T::kClusterSize > 1) cluster_arrive_on_start();
  extern __shared__ __align__(128) unsigned char smem_dynamic[];
  const SharedLayout<T> smem(smem_dynamic);
  Pipe::before_grid_wait(p, smem);
  wait_for_prerequisite_grids();
  trap_if_short_of_shared_memory<T>();
  if constexpr (T::kPersistent) {
    forward_persistent<T>(p, smem);
    return;
  }
  const Block<T> b(p, smem);
  // VARLEN: the grid covers the longest sequence; a block past its own sequence's end has no rows
  // (every block of a split shares its rows, so the split leaves as one: no count waits for it).
  if constexpr (T::kVarlen)
    if (b.m0 >= b.seq_q()) return;
  const Pipe pipe(b);
  // Warp-specialized: the producer warpgroup leaves once it has issued every copy.
  if constexpr (T::kProducer) {
    if (!pipe.prologue()) return;
  } else {
    pipe.prologue();
  }

  compute_tile<T>(pipe, b);
}

}  // namespace fa

// The grid's z dimension is SPLIT_KV, grouped into clusters of SPLIT_KV blocks on sm_90 up to the
// portable cluster size (fa::cluster_size); larger splits merge in the workspace, unclustered.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EVO_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define EVO_CLUSTER_DIMS(x, y, z)
#endif

// __grid_constant__: the TMA pipelines hand the copy engine the address of their tensor maps,
// which must stay in the kernel's parameter space rather than be copied to the stack. The block
// is WARPS warps, and the producer warpgroup of the warp-specialized schedules; their register
// hand-over (setmaxnreg) starts from what the launch bound leaves each thread.
template <int DTYPE, int CAUSAL, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES,
          int SCHEDULE, int SWIZZLE, int SPLIT_KV, int WGMMA, int TMA_BOX_ROWS, int LAZY_RESCALE,
          int CAUSAL_FOLD, int PACK_GQA, int VARLEN, int LONGEST_FIRST>
__global__ void __launch_bounds__(fa::block_threads(WARPS, SCHEDULE)) EVO_CLUSTER_DIMS(1, 1, fa::cluster_size(SPLIT_KV))
    fa_s512_v3_kernel(const __grid_constant__ FaParams p) {
  fa::forward<fa::KernelTraits<DTYPE, CAUSAL, HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, SCHEDULE,
                               SWIZZLE, SPLIT_KV, WGMMA, TMA_BOX_ROWS, LAZY_RESCALE, CAUSAL_FOLD,
                               PACK_GQA, VARLEN, LONGEST_FIRST>>(p);
}

}  // namespace evo
