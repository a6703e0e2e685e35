// fa_s512_v3: FlashAttention-2 forward, fp16 Q/K/V/O, fp32 accumulation and online softmax.
// Layout [batch, heads, seq, head_dim], contiguous. Tensor cores through mma.sync m16n8k16, fed by
// ldmatrix from shared memory. Compiled at run time by NVRTC (one instantiation per genome), and
// exported verbatim by `evoctl export`, so it includes nothing beyond the CUDA toolkit's headers.
//
// Work split: a block owns BLOCK_M query rows of one (batch, head). Its warps form a
// WARPS_M x WARPS_KV grid: WARPS_M = min(WARPS, BLOCK_M/16) warps split the rows, and the remaining
// WARPS_KV split the keys of every K/V tile. Each warp keeps its own running max, sum and output
// accumulator over its keys (online softmax is exact over any partition of the keys); the
// partial results merge once, through shared memory, at the end. With SPLIT_KV > 1 a cluster of
// SPLIT_KV blocks (sm_90) shares one row tile: each takes a slice of the keys and the blocks
// merge their partial results through distributed shared memory, so no block reads all of K/V.
//
// WGMMA = 1 (sm_90a) swaps the tensor-core instructions and nothing else: each warpgroup (4 warps)
// owns 64 query rows, S = Q K^T is one wgmma.mma_async chain per tile with Q and K read from
// shared memory through descriptors, and O += P V takes P from registers. The accumulators of a
// wgmma have the same per-warp layout as m16n8k16 ones, so masking, the online softmax and the
// epilogues are shared by both paths. Tiles then use the 128-byte swizzle the descriptors describe.
//
// TMA = 1 (sm_90a) hands the copies to the tensor memory accelerator: one thread issues each
// tile as a few bulk tensor copies that land already swizzled and complete on an mbarrier, so the
// warps spend no instructions on addresses and wait on the barrier instead of a block-wide sync.
// The host describes Q, K and V once per call with tensor maps (attention_tensor_maps.h) whose
// boxes are 64 columns by TMA_BOX_ROWS (32, 64, or 256 for a whole tile) rows, cut to each
// tile's rows where it has fewer. With one stage, K and V are refilled
// apart, each while the other half of the tile is computed. Under mma.sync every stage's K and V
// complete on barriers of their own, so a tile's scores start before its V has landed.
// STAGE_RELEASE = 1 (with TMA) also drops the block-wide barrier that ends each tile: every warp
// counts itself out of a stage once it has read it, and the last warp to leave refills the stage
// on the spot, so no warp waits for another and the warpgroups of a block need not move in step.
// PINGPONG = 1 (two warpgroups, STAGE_RELEASE and PV_ASYNC) takes turns on the tensor cores, as in
// FlashAttention-3: a warpgroup issues its tile's two GEMMs only when the other has issued its
// own, so one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores.
// QK_AHEAD = 1 (WGMMA, PV_ASYNC, TMA) issues tile t+1's QK^T beside P*V(t-1) in step t, so tile t's
// softmax runs under both GEMMs and no step waits for its own scores; it holds two tiles of
// scores in registers.
// LAZY_RESCALE = 1 (not with QK_AHEAD) raises a row's softmax base only when a tile's max passes
// it by more than 2^8, so most tiles skip shrinking the output (see online_softmax). Measured
// (bench/NOTES.md, H100): 2-8 % off the head-dim-128 PINGPONG block, 0.5-2 % off the mma.sync
// 32x256 block at 1,8, but 2 % onto the 2,8 wgmma block and 9 % onto the one-stage one (20 more
// registers): a gene, not a default.
// CAUSAL_FOLD = 1 (mma.sync, causal calls) gives each block half a block of rows from the start of
// the sequence and half from its end, so that every block sees about as many keys as any other
// instead of the last block seeing all of them and the first almost none. Each warp then skips
// the key ranges that lie wholly above its rows, and masks only the one its rows' diagonal
// crosses, and under TMA waits only for the tiles it reads. Non-causal calls run as without it.
// The back rows still read every tile, so at sequence 512 the fold alone is level; with
// LAZY_RESCALE, whose skipped rescales shorten that chain, it took 6 % off the 1,8 causal call
// (bench/NOTES.md).
// Under mma.sync each row's probabilities are summed on the tensor cores, as one more n8 column
// block of O += P V whose B operand is all ones, instead of an add per score: the loop is paced
// by its instruction count more than by any unit (bench/NOTES.md, 1-3 % on every mma.sync
// genome measured). Under WGMMA the extra m64n8 wgmma per k-step cost more than it saved.
#include <cuda_fp16.h>

namespace evo {

struct FaParams {
  const __half* q;
  const __half* k;
  const __half* v;
  __half* o;
  int batch, heads, seq_q, seq_k;
  float softmax_scale;  // multiplies q.k before the softmax
  // Scratch for kernels whose space asks for it ("workspace_bytes"); fa_s512_v3 needs none
  // (its split-KV merges through distributed shared memory) and is passed nullptr.
  void* workspace;
  // TMA instantiations only: CUtensorMap descriptors of q, k, v and o, filled on the host by
  // evo::encode_attention_tensor_maps (attention_tensor_maps.h) before the launch.
  struct alignas(64) TensorMap {
    unsigned long long opaque[16];
  };
  TensorMap q_map, k_map, v_map, o_map;
};

namespace fa {

template <int CAUSAL_, int HEAD_DIM_, int BLOCK_M_, int BLOCK_N_, int WARPS_, int STAGES_,
          int CP_ASYNC_, int SWIZZLE_, int SPLIT_KV_, int WGMMA_, int PV_ASYNC_, int TMA_ = 0,
          int STAGE_RELEASE_ = 0, int PINGPONG_ = 0, int TMA_BOX_ROWS_ = 64, int QK_AHEAD_ = 0,
          int LAZY_RESCALE_ = 0, int CAUSAL_FOLD_ = 0>
struct KernelTraits {
  static constexpr bool kCausal = CAUSAL_ != 0;
  static constexpr int kHeadDim = HEAD_DIM_;
  static constexpr int kBlockM = BLOCK_M_;
  static constexpr int kBlockN = BLOCK_N_;
  static constexpr int kWarps = WARPS_;
  static constexpr int kStages = STAGES_;
  static constexpr bool kCpAsync = CP_ASYNC_ != 0;
  static constexpr bool kSwizzle = SWIZZLE_ != 0;
  static constexpr int kSplitKV = SPLIT_KV_;
  static constexpr bool kWgmma = WGMMA_ != 0;
  static constexpr bool kPvAsync = PV_ASYNC_ != 0;
  static constexpr bool kTma = TMA_ != 0;
  static constexpr bool kStageRelease = STAGE_RELEASE_ != 0;
  static constexpr bool kPingPong = PINGPONG_ != 0;
  static constexpr bool kQkAhead = QK_AHEAD_ != 0;
  static constexpr bool kLazyRescale = LAZY_RESCALE_ != 0;
  // CAUSAL_FOLD: the front half of the block's row warps takes rows from the sequence's start,
  // the back half rows from its end (see the top of the file). Q then arrives as two tiles, one
  // per half, in a second Q buffer. A non-causal call is not folded and keeps one Q buffer: it
  // runs the code of CAUSAL_FOLD = 0, and a run of non-causal shapes keeps only that value
  // (the gene's used_when in the space).
  static constexpr bool kFold = CAUSAL_FOLD_ != 0 && kCausal;
  static constexpr int kQBuffers = kFold ? 2 : 1;
  // Row sums of P from the tensor cores (see the top of the file).
  static constexpr bool kRowSumMma = !kWgmma;
  // The output leaves from key group 0's registers instead of through a staged tile and a
  // block-wide barrier. Measured (bench/NOTES.md, one H100 call): 4-5 % off the mma.sync 32x256
  // blocks at 1,8,512,64, but 14 % onto the two-warpgroup wgmma block at 2,8 and 3 % onto the
  // one-stage one at 16,16 causal (why those lose was not measured).
  static constexpr bool kStoreFromRegisters = !kWgmma;
  // WGMMA with TMA (one block per row tile): key group 0 writes its normalised rows into a
  // swizzled tile with stmatrix, and one thread sends the tile out as bulk tensor stores, instead
  // of half2 stores, a block-wide barrier and a 16-byte copy by every thread. Measured against
  // that, one H100 call: 16,16,512,64 45.2 -> 43.9 us, the 2,8 blocks level to 1.5 % faster.
  // (Under mma.sync it lost at 1,8 non-causal to the register store.)
  static constexpr bool kTmaStore = kWgmma && kTma && kSplitKV == 1;
  // TMA lands tiles in 128-byte-swizzled 64-column panels, which wgmma's descriptors also read.
  static constexpr bool kPanels = kWgmma || kTma;

  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpsM = kWarps < kBlockM / 16 ? kWarps : kBlockM / 16;
  static constexpr int kWarpsKV = kWarps / kWarpsM;
  static constexpr int kRowsPerWarp = kBlockM / kWarpsM;
  static constexpr int kKeysPerWarp = kBlockN / kWarpsKV;
  static constexpr int kMTiles = kRowsPerWarp / 16;   // m16 tiles per warp
  static constexpr int kSTiles = kKeysPerWarp / 8;    // n8 tiles of S per warp
  static constexpr int kPvSteps = kKeysPerWarp / 16;  // k16 steps of P*V
  static constexpr int kQkSteps = kHeadDim / 16;      // k16 steps of Q*K^T
  static constexpr int kOTiles = kHeadDim / 8;        // n8 tiles of O
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks per smem row
  // K/V tiles whose copies run ahead of the one being computed. PV_ASYNC holds one stage more:
  // the previous tile's V, read by a P*V still in flight.
  static constexpr int kPrefetch = kStages - 1 - (kPvAsync ? 1 : 0);
  // TMA with one stage (and no STAGE_RELEASE): K and V have their own barriers and are refilled
  // apart, K(t+1) as soon as QK^T(t) is done and V(t+1) once P*V(t) is, so each copy runs under
  // the GEMM and softmax of the other half of the tile. Without it a single stage would copy
  // each tile only when it is needed (bench/NOTES.md: 55.6 -> 48.9 us at 16,16,512,64 for
  // 64x128 tiles, one H100 call); with it one stage keeps the copies off the critical path in
  // the least shared memory.
  static constexpr bool kSplitRefill = TMA_ != 0 && STAGES_ == 1 && STAGE_RELEASE_ == 0;
  // Where kSplitRefill waits for V(t). At head dim 64, before P is packed: waiting between the
  // packing and P*V, ptxas keeps the scores and P's fragments live at once (154 registers against
  // 122, three blocks per SM instead of four). At 128 two blocks fit either way (80 KB of shared
  // memory), and waiting early cost 4-6 % at 2,16,4096,128 (bench/NOTES.md, one H100 call).
  static constexpr bool kWaitVBeforePack = kSplitRefill && HEAD_DIM_ == 64;
  // STAGE_RELEASE refills a stage as soon as its last reader leaves it, so every stage is filled
  // up front and the copies then run kStages tiles ahead; so does kSplitRefill's one stage.
  static constexpr int kPrologueTiles = kStageRelease || kSplitRefill ? kStages : kPrefetch;
  // TMA under mma.sync: each stage's K and V complete on barriers of their own, so a tile's
  // QK^T and softmax start once its K has landed while its V is still on the way. The first
  // tile lands about 1.2 us into a 1,8,512,64 call, its V last (phase stamps, bench/NOTES.md);
  // this took 0.13 us off the causal 1,8 block.
  static constexpr bool kKvBarriers = kTma && !kWgmma;
  // TMA's "full" mbarriers: one per stage (K and V, or K alone with kSplitRefill or
  // kKvBarriers), one for Q, then V's: one with kSplitRefill, one per stage with kKvBarriers.
  static constexpr int kFullBarriers =
      kStages + 1 + (kSplitRefill ? 1 : 0) + (kKvBarriers ? kStages : 0);

  // Shared memory: Q tile, then STAGES K tiles, then STAGES V tiles (all fp16). After the main
  // loop the same bytes hold either the output tile (fp16) or the cross-warp merge buffer (fp32),
  // unless kMergeApart gives those their own bytes past the tiles.
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  static constexpr int kSmemMain = 2 * (kQBuffers * kQElems + 2 * kStages * kKVElems);
  // Partial results pass between warps, and between the blocks of a cluster, in fragment order:
  // per row pair of an m16 tile, the output columns plus running max and sum (HEAD_DIM + 8
  // floats per row over a warp's 32 lanes). Key groups 1.. hand theirs to key group 0 ...
  static constexpr int kFragmentBytesPerRow = 4 * (kHeadDim + 8);
  static constexpr int kSmemMerge = (kWarpsKV - 1) * kBlockM * kFragmentBytesPerRow;
  // kTmaStore: the output tile (fp16) follows the merge buffer, which key group 0 may still be
  // reading while it writes the tile. The buffer is whole 1024-byte swizzle periods (64-row
  // blocks, 72 or 136 floats per row).
  static constexpr int kSmemEpilogue = kSmemMerge + (kTmaStore ? 2 * kQElems : 0);
  // The 128-byte swizzle (wgmma's and TMA's) repeats every 1024 bytes and is anchored to absolute
  // addresses, so the tiles start on a 1024-byte boundary; the slack lets the kernel round its
  // base up.
  static constexpr int kSmemAlign = kPanels ? 1024 : 0;
  // TMA: a "full" mbarrier per stage and one for Q, then (STAGE_RELEASE) a counter of the warps
  // that have left each stage, after the tiles (never overlaid by the epilogue).
  static constexpr int kSmemBarriers = kTma ? 128 : 0;
  // TMA blocks whose key groups merge put the merge buffer (and kTmaStore's output tile) past the
  // tiles, where the block still fits the 227 KB a block may take on sm_90 (the only target TMA
  // compiles for): then no block-wide barrier ends the loop (nothing overlays a tile a slower
  // warp may still read), key groups 1.. hand their partials over on a named barrier and leave,
  // and key group 0 waits for them alone. Measured (bench/NOTES.md, one H200 call): 2-4 % off
  // the small shapes' 2,8 and 1,8 blocks. The buffers' own bytes (9-63 KB at head dim 64) can
  // cost blocks that share an SM one block per SM; the large shapes' winners have one key group
  // and do not merge.
  static constexpr int kSmemOptIn = 227 * 1024;
  static constexpr bool kMergeApart =
      kSplitKV == 1 && kWarpsKV > 1 && kTma &&
      kSmemMain + kSmemEpilogue + kSmemAlign + kSmemBarriers <= kSmemOptIn;
  static constexpr int kSmemEpilogueAt = kMergeApart ? kSmemMain : 0;
  static constexpr int kSmemTiles = kMergeApart               ? kSmemMain + kSmemEpilogue
                                    : kSmemMain > kSmemEpilogue ? kSmemMain
                                                                : kSmemEpilogue;
  // SPLIT_KV: every other block of the cluster writes its partial for this block's columns into
  // an inbox of its own, after the barriers. It is written while this block may still be in its
  // main loop, so it overlays nothing.
  // Per sender, per row: this block's share of the output columns and the running max and sum.
  static constexpr int kColsPerRank = (kHeadDim / 8 + kSplitKV - 1) / kSplitKV;  // n8 tiles
  static constexpr int kSmemInbox = (kSplitKV - 1) * kBlockM * 32 * (kColsPerRank + 1);
  static constexpr int kSmemBytes = kSmemTiles + kSmemAlign + kSmemBarriers + kSmemInbox;
  // A bulk tensor copy moves one box: 64 columns (the 128-byte swizzle's width) by TMA_BOX_ROWS
  // rows of one (batch, head), or by the tile's rows where the tile is shorter: 256 means each
  // tile in one box per panel. Q and O boxes (BLOCK_M rows at most) and K/V boxes (BLOCK_N) may
  // so differ; the host encodes the same boxes (encode_attention_tensor_maps is told both heights
  // by the launch formulas). No size wins everywhere (bench/NOTES.md): 8 KiB boxes fill a stage
  // faster at the large shapes, 4 KiB ones start the first tile sooner, and whole-tile boxes
  // spare the issuing thread's queue where tiles are refilled (1,4,1000,64).
  static constexpr int kTmaBoxCols = 64;
  static constexpr int kTmaBoxRows = TMA_BOX_ROWS_;
  template <int kTileRows>
  static constexpr int kTmaBoxRowsOf = kTileRows < kTmaBoxRows ? kTileRows : kTmaBoxRows;

  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dim must be 64 or 128");
  static_assert(kBlockM % 16 == 0, "BLOCK_M must be whole m16 MMA tiles");
  static_assert(kWarps % kWarpsM == 0 && kBlockM % (16 * kWarpsM) == 0,
                "warps must split the rows evenly");
  static_assert(kKeysPerWarp % 16 == 0, "each warp's keys must be whole k16 steps of P*V");
  static_assert(kStages >= 1 && kStages <= 4, "STAGES in 1..4");
  static_assert(kStages == 1 || kCpAsync, "a pipeline deeper than 1 needs cp.async");
  static_assert(kSplitKV == 1 || kSplitKV == 2 || kSplitKV == 4 || kSplitKV == 8,
                "SPLIT_KV is a portable cluster size: 1, 2, 4 or 8");
  static_assert(!kWgmma || (kWarps % 4 == 0 && kBlockM % 64 == 0 && kMTiles == 1),
                "WGMMA: whole warpgroups, each owning 64 rows (one m16 tile per warp)");
  static_assert(!kWgmma || kKeysPerWarp == 32 || kKeysPerWarp == 64 || kKeysPerWarp == 128,
                "WGMMA: each warpgroup's keys per tile are the N of one wgmma: 32, 64 or 128");
  static_assert(!kWgmma || (kCpAsync && kSwizzle), "WGMMA: cp.async into swizzled tiles");
  static_assert(
      !kPvAsync || (kWgmma && kStages >= 2),
      "PV_ASYNC: an asynchronous wgmma P*V, and a stage for its V besides the current tile");
  static_assert(!kTma || (kCpAsync && kSwizzle), "TMA: the copies land in swizzled panels");
  static_assert(!kTma || kWgmma || (kStages >= 2 && !kStageRelease),
                "TMA with mma.sync: whole stages, refilled behind the block-wide barrier");
  static_assert(!kTma || kTmaBoxRows == 32 || kTmaBoxRows == 64 || kTmaBoxRows == 256,
                "TMA_BOX_ROWS: 32, 64 or 256 (a whole tile)");
  static_assert(!kTma || (kBlockM >= 32 && kBlockM % kTmaBoxRowsOf<kBlockM> == 0 &&
                          kBlockN % kTmaBoxRowsOf<kBlockN> == 0),
                "TMA: tiles are whole boxes of 32 rows or more");
  static_assert(8 * kFullBarriers + 4 * kStages <= kSmemBarriers || !kTma,
                "TMA: room for the mbarriers and the stage counters");
  static_assert(!kStageRelease || kTma, "STAGE_RELEASE: stages are refilled by TMA");
  static_assert(!kPingPong || (kStageRelease && kPvAsync && kWarps == 8),
                "PINGPONG: two warpgroups whose two GEMMs per tile are issued together, and no "
                "block-wide barrier per tile to hold them in step");
  // Step t reads three stages: V(t-1) under the P*V in flight, V(t) for the next step's, and
  // K(t+1) under the scores issued early; with two, tile t+1 would refill the stage P*V(t-1)
  // still reads.
  static_assert(!kQkAhead || (kPvAsync && kTma && kStages >= 3 && !kPingPong),
                "QK_AHEAD: WGMMA with PV_ASYNC and TMA, three stages or more, no PINGPONG");
  // Under QK_AHEAD the next tile's scores are in flight while the output is rescaled; behind the
  // lazy rescale's branch ptxas serialises the wgmmas instead (its warning C7514; 6-13 % slower
  // at the small shapes, bench/NOTES.md).
  static_assert(!kLazyRescale || !kQkAhead, "LAZY_RESCALE: not with QK_AHEAD");
  // Folding pairs a front row warp with a back one, and a wgmma warpgroup's 64 rows or a split's
  // cluster would each need a fold of their own.
  static_assert(CAUSAL_FOLD_ == 0 || (!kWgmma && kSplitKV == 1 && kWarpsM % 2 == 0),
                "CAUSAL_FOLD: mma.sync, no SPLIT_KV, an even number of row warps");
};

// ---------------------------------------------------------------- PTX wrappers

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Programmatic dependent launch (sm_90). Launched with programmatic stream serialization, the
// next kernel in the stream may start while this one still runs, so that its launch and its
// blocks' start-up overlap this kernel's tail instead of following it. Both instructions are
// no-ops for a launch without that attribute.
// Lets the next kernel launch once every block of this grid has executed it (or exited).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Blocks until the grids this one depends on have finished and their writes are visible: no
// global memory may be read (or written) before it, since Q, K and V may be the previous
// kernel's output and O its input.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (tails past the sequence end).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// d += a * b, m16n8k16, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------- warpgroup MMA (sm_90a)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define EVO_HAS_WGMMA 1
#else
#define EVO_HAS_WGMMA 0
#endif

// One stage: the tiles sit at the same addresses in every iteration, so the compiler would compute
// every k-step's K and V descriptor once, before the loop, and hold them all in registers. Made
// opaque here, they are computed where they are used: with kWaitVBeforePack, wg 64x128x4x1 at
// head dim 64 takes 122 registers instead of 154, and four blocks fit on an SM instead of three.
template <class T>
__device__ __forceinline__ unsigned long long per_iteration(unsigned long long desc) {
  if constexpr (T::kStages == 1) asm volatile("" : "+l"(desc));
  return desc;
}

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte
// units) and the 128-byte swizzle mode. K-major tiles ignore the leading offset; for N-major ones
// it is the distance between 64-column panels. The stride offset is the distance between groups of
// 8 rows, 1024 bytes in these tiles.
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned leading_bytes) {
  return (unsigned long long)((smem_addr(p) & 0x3FFFF) >> 4) |
         ((unsigned long long)((leading_bytes >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// Register accesses before a wgmma, and shared-memory writes of the generic proxy (cp.async, st)
// before the async proxy reads them, must be ordered explicitly.
__device__ __forceinline__ void wgmma_fence() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still in flight; groups retire in order.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if EVO_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Named barriers 1 and 2 pass the tensor cores' turn between two warpgroups (PINGPONG): `sync`
// waits for the 128 arrivals of the other warpgroup, `arrive` gives them without waiting.
// Barrier 0 is __syncthreads'; kOutputBarrier gathers the warps that write the output tile, and
// kMergeBarrier (kMergeApart) hands key groups 1..'s partials to key group 0.
constexpr int kOutputBarrier = 3;
constexpr int kMergeBarrier = 4;  // kMergeApart: key groups 1.. arrive, key group 0 waits
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------- TMA and mbarriers (sm_90)
// A stage's mbarrier completes a phase when its expected bytes have landed; waiters name the
// phase by its parity. Off sm_90a the TMA path cannot be instantiated (WGMMA is required), so
// these are empty there.

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
#if EVO_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#endif
}
// Makes the initialised barriers visible to the copy engine before any copy names them.
__device__ __forceinline__ void mbarrier_init_fence() {
#if EVO_HAS_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// The calling thread's arrival, announcing `bytes` still to land in this phase.
__device__ __forceinline__ void mbarrier_expect_bytes(unsigned long long* bar, unsigned bytes) {
#if EVO_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
#if EVO_HAS_WGMMA
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
// Brings a tensor map into the copy engine's cache ahead of the first copy that names it.
__device__ __forceinline__ void prefetch_tensor_map(const FaParams::TensorMap& map) {
#if EVO_HAS_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map))
               : "memory");
#endif
}
// One box of a 3-d tensor map (column, row, batch*head) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_box(void* dst, const FaParams::TensorMap& map, int col,
                                             int row, int bh, unsigned long long* bar) {
#if EVO_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(col), "r"(row), "r"(bh),
      "r"(smem_addr(bar))
      : "memory");
#endif
}
// One box of shared memory out through a 3-d tensor map; rows past the map's bounds (the end of
// the sequence) are not written.
__device__ __forceinline__ void tma_store_box(const void* src, const FaParams::TensorMap& map,
                                              int col, int row, int bh) {
#if EVO_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
          reinterpret_cast<unsigned long long>(&map)),
      "r"(col), "r"(row), "r"(bh), "r"(smem_addr(src))
      : "memory");
#endif
}
// The block's shared memory is released when it exits: the copy engine must have read it all.
__device__ __forceinline__ void tma_store_commit_and_wait_read() {
#if EVO_HAS_WGMMA
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
// Four 8x8 fp16 matrices from a warp's registers into shared memory; lane i names row i % 8 of
// matrix i / 8.
__device__ __forceinline__ void stmatrix_x4(void* p, const unsigned (&r)[4]) {
#if EVO_HAS_WGMMA
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(p)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}
// A wgmma reads and writes its registers asynchronously; after the wait, these empty asm
// statements keep the compiler from touching them any earlier.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(unsigned (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

#define EVO_ACC4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])

// wgmma.mma_async m64nNk16, fp16 inputs, fp32 accumulators, one specialisation per N.
template <int N>
struct Wgmma;

#if EVO_HAS_WGMMA
template <>
struct Wgmma<32> {
  // d (+)= A[64x16] * B[16x32]; A and B from shared memory, both K-major.
  static __device__ __forceinline__ void ss(float (&d)[4][4], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "%16, %17, p, 1, 1, 0, 0;\n}\n"
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3)
        : "l"(a), "l"(b), "r"(accumulate));
  }
};

template <>
struct Wgmma<64> {
  // d (+)= A[64x16] * B[16x64]; A and B from shared memory, both K-major.
  static __device__ __forceinline__ void ss(float (&d)[8][4], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3), EVO_ACC4(d, 4),
          EVO_ACC4(d, 5), EVO_ACC4(d, 6), EVO_ACC4(d, 7)
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A[64x16] * B[16x64]; A from registers (the m16n8k16 A fragment of each warp's 16
  // rows), B from shared memory, N-major (transposed).
  static __device__ __forceinline__ void rs(float (&d)[8][4], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3), EVO_ACC4(d, 4),
          EVO_ACC4(d, 5), EVO_ACC4(d, 6), EVO_ACC4(d, 7)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<128> {
  // d (+)= A[64x16] * B[16x128]; A and B from shared memory, both K-major.
  static __device__ __forceinline__ void ss(float (&d)[16][4], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
        "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3), EVO_ACC4(d, 4),
          EVO_ACC4(d, 5), EVO_ACC4(d, 6), EVO_ACC4(d, 7), EVO_ACC4(d, 8), EVO_ACC4(d, 9),
          EVO_ACC4(d, 10), EVO_ACC4(d, 11), EVO_ACC4(d, 12), EVO_ACC4(d, 13), EVO_ACC4(d, 14),
          EVO_ACC4(d, 15)
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A[64x16] * B[16x128]; A from registers (the m16n8k16 A fragment of each warp's 16
  // rows), B from shared memory, N-major (transposed).
  static __device__ __forceinline__ void rs(float (&d)[16][4], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
        "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3), EVO_ACC4(d, 4),
          EVO_ACC4(d, 5), EVO_ACC4(d, 6), EVO_ACC4(d, 7), EVO_ACC4(d, 8), EVO_ACC4(d, 9),
          EVO_ACC4(d, 10), EVO_ACC4(d, 11), EVO_ACC4(d, 12), EVO_ACC4(d, 13), EVO_ACC4(d, 14),
          EVO_ACC4(d, 15)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

#else
// Without sm_90a features the instructions do not exist: a WGMMA genome built for another
// architecture compiles, and traps if launched.
template <int N>
struct Wgmma {
  static __device__ __forceinline__ void ss(float (&)[N / 8][4], unsigned long long,
                                            unsigned long long, int) {
    __trap();
  }
  static __device__ __forceinline__ void rs(float (&)[N / 8][4], const unsigned (&)[4],
                                            unsigned long long) {
    __trap();
  }
};
#endif
#undef EVO_ACC4

// Thread-block clusters (sm_90): this block's rank, a peer's shared-memory address, and the
// cluster-wide barrier whose release/acquire orders shared-memory writes across the cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ unsigned peer_smem_addr(const void* p, unsigned rank) {
  unsigned out = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_addr(p)), "r"(rank));
#endif
  return out;
}
__device__ __forceinline__ void store_peer_f32(unsigned addr, float v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
#endif
}
// A block may touch another's shared memory only once that block has started: every block
// arrives (relaxed: it orders nothing) as it starts, and waits before its first remote access.
__device__ __forceinline__ void cluster_arrive_on_start() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait_until_started() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}
// Release: this thread's earlier writes, remote ones included, are visible to every block of the
// cluster once it has passed the barrier (acquire).
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#else
  __trap();  // SPLIT_KV > 1 needs clusters, which exist from sm_90 on
#endif
}

// -inf without <math.h>, which NVRTC does not provide.
__device__ __forceinline__ float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

// ---------------------------------------------------------------- shared-memory tiles

// Element offset of (row, col) in a [ROWS][HEAD_DIM] fp16 tile. With SWIZZLE the 16-byte chunk
// index is XORed with the row, so the 8 rows one ldmatrix reads fall in 8 different bank groups.
// WGMMA and TMA tiles are what wgmma's descriptors and the tensor maps call 128-byte-swizzled:
// 64-column panels ([ROWS][64] each, one after the other) whose 8 chunks per row are XORed with
// the row's low 3 bits.
template <class T, int ROWS>
__device__ __forceinline__ int tile_offset(int row, int col) {
  if constexpr (T::kPanels) {
    const int chunk = ((col >> 3) & 7) ^ (row & 7);
    return (col >> 6) * ROWS * 64 + row * 64 + (chunk << 3) + (col & 7);
  } else if constexpr (T::kSwizzle) {
    const int chunk = (col >> 3) ^ (row & 7);
    return row * T::kHeadDim + (chunk << 3) + (col & 7);
  } else {
    return row * T::kHeadDim + col;
  }
}

// Copies rows [row0, row0 + ROWS) of a [seq][HEAD_DIM] matrix into a tile; rows at or past
// `seq` become zeros. Every thread of the block takes part.
template <class T, int ROWS>
__device__ __forceinline__ void load_tile(__half* tile, const __half* src, int row0, int seq) {
  constexpr int kChunks = ROWS * T::kChunksPerRow;
  constexpr int kIters = (kChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = threadIdx.x + i * T::kThreads;
    if (kChunks % T::kThreads != 0 && c >= kChunks) break;
    const int row = c / T::kChunksPerRow;
    const int col = (c % T::kChunksPerRow) * 8;
    const bool valid = row0 + row < seq;
    const __half* g = src + (long long)(valid ? row0 + row : 0) * T::kHeadDim + col;
    __half* s = tile + tile_offset<T, ROWS>(row, col);
    if constexpr (T::kCpAsync) {
      cp_async_16(s, g, valid);
    } else {
      uint4 x = valid ? *reinterpret_cast<const uint4*>(g) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(s) = x;
    }
  }
}

// The TMA boxes of a [ROWS][HEAD_DIM] tile, in the order they are issued: f(row, col) with each
// box's first row and column within the tile.
template <class T, int ROWS, class F>
__device__ __forceinline__ void for_each_tma_box(F&& f) {
#pragma unroll
  for (int col = 0; col < T::kHeadDim; col += T::kTmaBoxCols)
#pragma unroll
    for (int row = 0; row < ROWS; row += T::template kTmaBoxRowsOf<ROWS>) f(row, col);
}

// TMA: the same rows as load_tile, as boxes issued by one thread; rows past the sequence's end
// arrive as zeros (the tensor map's bounds are per (batch, head)). Completes on `bar`, which
// the caller has told to expect ROWS * HEAD_DIM * 2 bytes.
template <class T, int ROWS>
__device__ __forceinline__ void tma_load_tile(__half* tile, const FaParams::TensorMap& map,
                                              int row0, int bh, unsigned long long* bar) {
  for_each_tma_box<T, ROWS>([&](int row, int col) {
    tma_load_box(tile + tile_offset<T, ROWS>(row, col), map, col, row0 + row, bh, bar);
  });
}

// The reverse, by one thread: a tile out to rows [row0, row0 + ROWS) of one (batch, head); rows
// past the sequence's end are not written. Returns once the copy engine has read the tile.
template <class T, int ROWS>
__device__ __forceinline__ void tma_store_tile(const __half* tile, const FaParams::TensorMap& map,
                                               int row0, int bh) {
  for_each_tma_box<T, ROWS>([&](int row, int col) {
    tma_store_box(tile + tile_offset<T, ROWS>(row, col), map, col, row0 + row, bh);
  });
  tma_store_commit_and_wait_read();
}

// ---------------------------------------------------------------- the steps of one K/V tile

// S = Q K^T for this warp's rows and keys, through mma.sync: Q from registers, K by ldmatrix.
template <class T>
__device__ __forceinline__ void scores_mma_sync(
    float (&s)[T::kMTiles][T::kSTiles][4], const unsigned (&q_frag)[T::kMTiles][T::kQkSteps][4],
    const __half* k_tile, int key_w, int lane) {
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
        mma_16816(s[mt][2 * np], q_frag[mt][ks], b[0], b[1]);
        mma_16816(s[mt][2 * np + 1], q_frag[mt][ks], b[2], b[3]);
      }
    }
}

// S = Q K^T for the warpgroup's 64 rows: one chain of HEAD_DIM/16 wgmmas, issued and committed
// as one group but not waited for. The first overwrites s.
template <class T>
__device__ __forceinline__ void issue_scores_wgmma(float (&s)[T::kSTiles][4], const __half* q_tile,
                                                   const __half* k_tile, int row_wg, int key_w) {
  const unsigned long long q_desc = smem_desc(q_tile + tile_offset<T, T::kBlockM>(row_wg, 0), 16);
  const unsigned long long k_desc =
      per_iteration<T>(smem_desc(k_tile + tile_offset<T, T::kBlockN>(key_w, 0), 16));
#pragma unroll
  for (int ks = 0; ks < T::kQkSteps; ++ks)
    Wgmma<T::kKeysPerWarp>::ss(s, q_desc + (tile_offset<T, T::kBlockM>(0, ks * 16) >> 3),
                               k_desc + (tile_offset<T, T::kBlockN>(0, ks * 16) >> 3), ks > 0);
  wgmma_commit();
}

// P as m16n8k16 A fragments: the fp32 scores of each k16 step of keys, rounded to fp16 pairs.
template <class T>
__device__ __forceinline__ void pack_p(unsigned (&a)[4], const float (&s)[T::kSTiles][4], int kk) {
  a[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// fp16 1.0 twice: a B fragment of ones.
constexpr unsigned kHalf2Ones = 0x3C003C00u;

// O += P V through mma.sync, V fragments by transposing ldmatrix, and the rows' sums of P into
// every column of `row_sum_mma` (B all ones).
template <class T>
__device__ __forceinline__ void accumulate_pv_mma_sync(float (&acc)[T::kMTiles][T::kOTiles][4],
                                                       float (&row_sum_mma)[T::kMTiles][1][4],
                                                       const float (&s)[T::kMTiles][T::kSTiles][4],
                                                       const __half* v_tile, int key_w, int lane) {
#pragma unroll
  for (int kk = 0; kk < T::kPvSteps; ++kk) {
    unsigned a[T::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt) pack_p<T>(a[mt], s[mt], kk);
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
      mma_16816(row_sum_mma[mt][0], a[mt], kHalf2Ones, kHalf2Ones);
#pragma unroll
    for (int dp = 0; dp < T::kOTiles / 2; ++dp) {
      unsigned b[4];
      const int key = key_w + kk * 16 + (lane & 15);
      const int col = dp * 16 + (lane >> 4) * 8;
      ldmatrix_x4_trans(b, v_tile + tile_offset<T, T::kBlockN>(key, col));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816(acc[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O += P V for the warpgroup: P from registers, V (head dim contiguous, N-major) through a
// descriptor; a 128-wide head dim spans two panels. Committed as one group, not waited for.
template <class T>
__device__ __forceinline__ void issue_pv_wgmma(float (&acc)[T::kOTiles][4],
                                               const unsigned (&p_frag)[T::kPvSteps][4],
                                               const __half* v_tile, int key_w) {
  const unsigned long long v_desc = per_iteration<T>(
      smem_desc(v_tile + tile_offset<T, T::kBlockN>(key_w, 0), T::kBlockN * 64 * 2));
#pragma unroll
  for (int kk = 0; kk < T::kPvSteps; ++kk)
    Wgmma<T::kHeadDim>::rs(acc, p_frag[kk], v_desc + (tile_offset<T, T::kBlockN>(kk * 16, 0) >> 3));
  wgmma_commit();
}

// Masks keys past the sequence end and (causal) above the diagonal.
template <class T>
__device__ __forceinline__ void mask_scores(float (&s)[T::kMTiles][T::kSTiles][4], int row0,
                                            int key0, int seq_k, int lane) {
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kSTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + mt * 16 + (lane >> 2) + (i >= 2 ? 8 : 0);
        const int key = key0 + nt * 8 + (lane & 3) * 2 + (i & 1);
        if (key >= seq_k || (T::kCausal && key > row)) s[mt][nt][i] = neg_inf();
      }
}

// Online softmax in the log2 domain with the scale folded in: turns s into unnormalised
// probabilities against the row's base (its running max), updates the running sum, and returns
// in alpha the factor by which the output accumulated so far must shrink. With LAZY_RESCALE the
// base rises only when a tile's max passes it by more than kLazyHeadroom (as in
// FlashAttention-4): probabilities then reach at most 2^8, which fp16 and the fp32 sums hold as
// exactly as ones below 1, and most tiles leave alpha at 1, so the rescale can be skipped.
// Returns whether the output must shrink: always without LAZY_RESCALE, else whether this thread
// raised a base.
constexpr float kLazyHeadroom = 8.f;
template <class T>
__device__ __forceinline__ bool online_softmax(float (&s)[T::kMTiles][T::kSTiles][4],
                                               float (&row_max)[T::kMTiles][2],
                                               float (&row_sum)[T::kMTiles][2],
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

template <class T>
__device__ __forceinline__ void rescale(float (&acc)[T::kMTiles][T::kOTiles][4],
                                        float (&row_sum_mma)[T::kMTiles][1][4],
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
    if constexpr (T::kRowSumMma) {  // one column of each row half is enough: it is all that is read
      row_sum_mma[mt][0][0] *= alpha[mt][0];
      row_sum_mma[mt][0][2] *= alpha[mt][1];
    }
  }
}

// ---------------------------------------------------------------- epilogue

// Folds a partial result (unnormalised output, running max and sum of the same rows, over other
// keys) into this thread's registers. Online softmax is exact over any partition of the keys.
template <class T>
__device__ __forceinline__ void fold_partial(float (&acc)[T::kMTiles][T::kOTiles][4],
                                             float (&row_max)[T::kMTiles][2],
                                             float (&row_sum)[T::kMTiles][2], int mt, int h,
                                             float other_max, float other_sum,
                                             const float (&other_acc)[T::kOTiles][2], int nt_begin,
                                             int nt_end) {
  const float new_max = fmaxf(row_max[mt][h], other_max);
  const float base = new_max == neg_inf() ? 0.f : new_max;
  const float a = fast_exp2(row_max[mt][h] - base);
  const float b = fast_exp2(other_max - base);
  row_max[mt][h] = new_max;
  row_sum[mt][h] = row_sum[mt][h] * a + other_sum * b;
#pragma unroll
  for (int nt = 0; nt < T::kOTiles; ++nt) {
    if (nt < nt_begin || nt >= nt_end) continue;
    acc[mt][nt][2 * h] = acc[mt][nt][2 * h] * a + other_acc[nt][0] * b;
    acc[mt][nt][2 * h + 1] = acc[mt][nt][2 * h + 1] * a + other_acc[nt][1] * b;
  }
}

// A thread's partial result in fragment order: for every value, 32 consecutive floats, one per
// lane, so that writes and reads are free of bank conflicts and need no index arithmetic.
template <class T>
struct Fragment {
  static constexpr int kAccVals = T::kMTiles * T::kOTiles * 4;
  static constexpr int kVals = kAccVals + T::kMTiles * 4;  // + max and sum of both row halves
  __device__ static constexpr int acc_index(int mt, int nt, int i) {
    return (mt * T::kOTiles + nt) * 4 + i;
  }
  __device__ static constexpr int max_index(int mt, int h) { return kAccVals + mt * 4 + h; }
  __device__ static constexpr int sum_index(int mt, int h) { return kAccVals + mt * 4 + 2 + h; }
};

// SPLIT_KV: what one block sends another, in the same lane-interleaved order: per row pair of
// an m16 tile, the receiver's kColsPerRank output n8 tiles (two values per lane each), then the
// running max and sum.
template <class T>
struct Inbox {
  static constexpr int kPerRowHalf = 2 * T::kColsPerRank + 2;
  static constexpr int kVals = T::kMTiles * 2 * kPerRowHalf;
  __device__ static int acc_index(int mt, int h, int col_tile, int i) {
    return (mt * 2 + h) * kPerRowHalf + col_tile * 2 + i;
  }
  __device__ static constexpr int max_index(int mt, int h) {
    return (mt * 2 + h) * kPerRowHalf + 2 * T::kColsPerRank;
  }
  __device__ static constexpr int sum_index(int mt, int h) { return max_index(mt, h) + 1; }
};

template <class T>
__device__ __forceinline__ void write_fragment(float* dst,
                                               const float (&acc)[T::kMTiles][T::kOTiles][4],
                                               const float (&row_max)[T::kMTiles][2],
                                               const float (&row_sum)[T::kMTiles][2]) {
  using F = Fragment<T>;
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) dst[F::acc_index(mt, nt, i) * 32] = acc[mt][nt][i];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      dst[F::max_index(mt, h) * 32] = row_max[mt][h];
      dst[F::sum_index(mt, h) * 32] = row_sum[mt][h];
    }
  }
}

// Warps that split a tile's keys (WARPS_KV > 1) hold partial results for the same rows; those of
// key groups 1.. pass theirs through shared memory, in fragment order, to key group 0. Under
// kMergeApart they are then done: the caller's remaining work is key group 0's.
template <class T>
__device__ __forceinline__ void merge_key_groups(unsigned char* smem,
                                                 float (&acc)[T::kMTiles][T::kOTiles][4],
                                                 float (&row_max)[T::kMTiles][2],
                                                 float (&row_sum)[T::kMTiles][2], int warp_m,
                                                 int warp_kv, int lane) {
  using F = Fragment<T>;
  // The buffer overlays tiles that slower warps may still have been reading (the barrier that
  // ends the main loop has let them all finish), or with kMergeApart lies past them.
  // [WARPS_KV - 1][WARPS_M][F::kVals][32]
  float* buf = reinterpret_cast<float*>(smem + T::kSmemEpilogueAt);
  if (warp_kv > 0)
    write_fragment<T>(buf + ((warp_kv - 1) * T::kWarpsM + warp_m) * F::kVals * 32 + lane, acc,
                      row_max, row_sum);
  if constexpr (T::kMergeApart) {
    if (warp_kv > 0) {
      named_barrier_arrive(kMergeBarrier, T::kThreads);
      return;
    }
    named_barrier_sync(kMergeBarrier, T::kThreads);
  } else {
    __syncthreads();
  }
  if (warp_kv == 0) {
#pragma unroll
    for (int g = 1; g < T::kWarpsKV; ++g) {
      const float* src = buf + ((g - 1) * T::kWarpsM + warp_m) * F::kVals * 32 + lane;
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float other[T::kOTiles][2];
#pragma unroll
          for (int nt = 0; nt < T::kOTiles; ++nt) {
            other[nt][0] = src[F::acc_index(mt, nt, 2 * h) * 32];
            other[nt][1] = src[F::acc_index(mt, nt, 2 * h + 1) * 32];
          }
          fold_partial<T>(acc, row_max, row_sum, mt, h, src[F::max_index(mt, h) * 32],
                          src[F::sum_index(mt, h) * 32], other, 0, T::kOTiles);
        }
    }
  }
  // The staged output overlays the buffer. (kTmaStore's tile lies beside it.)
  if constexpr (!T::kStoreFromRegisters && !T::kTmaStore) __syncthreads();
}

// What a row's accumulated output is multiplied by: 1 / its softmax sum, or 0 for a row that saw
// no key (a split without keys, a row past the sequence's end).
__device__ __forceinline__ float output_scale(float row_sum) {
  return row_sum > 0.f ? 1.f / row_sum : 0.f;
}

// Normalises key group 0's rows and writes them out: straight from its registers
// (kStoreFromRegisters), or staged as an fp16 tile in shared memory and copied out in 16-byte rows
// by every thread of the block.
template <class T>
__device__ __forceinline__ void store_output(unsigned char* smem, __half* o, int m0, int seq_q,
                                             const float (&acc)[T::kMTiles][T::kOTiles][4],
                                             const float (&row_sum)[T::kMTiles][2], int row_w,
                                             int warp_kv, int lane) {
  __half* o_tile = reinterpret_cast<__half*>(smem);
  if (warp_kv == 0) {
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv = output_scale(row_sum[mt][h]);
        const int row = row_w + mt * 16 + (lane >> 2) + 8 * h;
        if (T::kStoreFromRegisters && m0 + row >= seq_q) continue;
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt) {
          const int col = nt * 8 + (lane & 3) * 2;
          __half* dst = T::kStoreFromRegisters ? o + (long long)(m0 + row) * T::kHeadDim + col
                                               : o_tile + tile_offset<T, T::kBlockM>(row, col);
          *reinterpret_cast<__half2*>(dst) =
              __floats2half2_rn(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
        }
      }
  }
  if constexpr (T::kStoreFromRegisters) return;
  __syncthreads();
  constexpr int kChunks = T::kBlockM * T::kChunksPerRow;
  constexpr int kIters = (kChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = threadIdx.x + i * T::kThreads;
    if (kChunks % T::kThreads != 0 && c >= kChunks) break;
    const int row = c / T::kChunksPerRow;
    const int col = (c % T::kChunksPerRow) * 8;
    if (m0 + row < seq_q)
      *reinterpret_cast<uint4*>(o + (long long)(m0 + row) * T::kHeadDim + col) =
          *reinterpret_cast<const uint4*>(o_tile + tile_offset<T, T::kBlockM>(row, col));
  }
}

// kTmaStore: key group 0 normalises its rows into an fp16 tile in TMA's swizzled panels, past the
// merge buffer (its other warps may still be reading that), and thread 0 stores the tile in
// boxes through the output's tensor map.
template <class T>
__device__ __forceinline__ void store_output_tma(unsigned char* smem, const FaParams& p, int m0,
                                                 int bh,
                                                 const float (&acc)[T::kMTiles][T::kOTiles][4],
                                                 const float (&row_sum)[T::kMTiles][2], int row_w,
                                                 int warp_kv, int lane) {
  static_assert((T::kSmemEpilogueAt + T::kSmemMerge) % 1024 == 0,
                "the output tile starts a swizzle period");
  __half* o_tile = reinterpret_cast<__half*>(smem + T::kSmemEpilogueAt + T::kSmemMerge);
  if (warp_kv != 0) return;
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
    const float inv0 = output_scale(row_sum[mt][0]);
    const float inv1 = output_scale(row_sum[mt][1]);
    // Matrices 0-3 of each stmatrix: rows 0-7 and 8-15 of n8 tile nt, then of tile nt + 1.
    const int row = row_w + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; nt += 2) {
      unsigned r[4];
      r[0] = pack_half2(acc[mt][nt][0] * inv0, acc[mt][nt][1] * inv0);
      r[1] = pack_half2(acc[mt][nt][2] * inv1, acc[mt][nt][3] * inv1);
      r[2] = pack_half2(acc[mt][nt + 1][0] * inv0, acc[mt][nt + 1][1] * inv0);
      r[3] = pack_half2(acc[mt][nt + 1][2] * inv1, acc[mt][nt + 1][3] * inv1);
      stmatrix_x4(o_tile + tile_offset<T, T::kBlockM>(row, (nt + (lane >> 4)) * 8), r);
    }
  }
  fence_proxy_async();  // the tile's writes, visible to the copy engine
  named_barrier_sync(kOutputBarrier, T::kWarpsM * 32);
  if (threadIdx.x == 0) tma_store_tile<T, T::kBlockM>(o_tile, p.o_map, m0, bh);
}

// SPLIT_KV: the cluster's blocks hold partial results for the same rows over different keys, and
// block r writes output columns [r, r + 1) * kColsPerRank. Key group 0 of each block stores, into
// every other block's inbox, that block's columns of its partial plus the rows' running max and
// sum (remote stores: no round trip), and arrives at the cluster barrier; past it, every block
// folds what its inbox received into its own registers and writes its columns. One barrier: no
// block reads another's memory, so none has to stay for the others. (Before, each block read the
// others' partials through distributed shared memory between two barriers: 2.4 us of a 6.8 us
// call at 1,8,512,64; bench/NOTES.md.)
template <class T>
__device__ __forceinline__ void merge_cluster_and_store(unsigned char* smem, __half* o, int m0,
                                                        int seq_q,
                                                        float (&acc)[T::kMTiles][T::kOTiles][4],
                                                        float (&row_max)[T::kMTiles][2],
                                                        float (&row_sum)[T::kMTiles][2], int warp_m,
                                                        int row_w, int warp_kv, int lane) {
  using I = Inbox<T>;
  constexpr int kSlotFloats = T::kWarpsM * I::kVals * 32;
  // Slot i - 1 of block r's inbox holds what block r + i (mod SPLIT_KV) sent it.
  float* inbox = reinterpret_cast<float*>(smem + T::kSmemTiles + T::kSmemBarriers) +
                 warp_m * I::kVals * 32 + lane;
  const unsigned rank = cluster_rank();
  cluster_wait_until_started();  // long since true: every block arrived as it started
  if (warp_kv == 0) {
#pragma unroll
    for (int i = 1; i < T::kSplitKV; ++i) {
      const unsigned to = (rank + i) % T::kSplitKV;
      // In block `to`, this block is `to` + (SPLIT_KV - i): slot SPLIT_KV - i - 1.
      const unsigned dst = peer_smem_addr(inbox + (T::kSplitKV - i - 1) * kSlotFloats, to);
      const int to_begin = to * T::kColsPerRank;
      const int to_end = min(T::kOTiles, to_begin + T::kColsPerRank);
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int nt = 0; nt < T::kOTiles; ++nt) {
            if (nt < to_begin || nt >= to_end) continue;
            store_peer_f32(dst + 4 * 32 * I::acc_index(mt, h, nt - to_begin, 0), acc[mt][nt][2 * h]);
            store_peer_f32(dst + 4 * 32 * I::acc_index(mt, h, nt - to_begin, 1),
                           acc[mt][nt][2 * h + 1]);
          }
          store_peer_f32(dst + 4 * 32 * I::max_index(mt, h), row_max[mt][h]);
          store_peer_f32(dst + 4 * 32 * I::sum_index(mt, h), row_sum[mt][h]);
        }
    }
  }
  cluster_sync();  // every block's stores into every inbox are visible
  if (warp_kv != 0) return;
  const int nt_begin = rank * T::kColsPerRank;
  const int nt_end = min(T::kOTiles, nt_begin + T::kColsPerRank);
#pragma unroll
  for (int i = 1; i < T::kSplitKV; ++i) {
    const float* src = inbox + (i - 1) * kSlotFloats;
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float other[T::kOTiles][2];
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt) {
          if (nt < nt_begin || nt >= nt_end) continue;
          other[nt][0] = src[I::acc_index(mt, h, nt - nt_begin, 0) * 32];
          other[nt][1] = src[I::acc_index(mt, h, nt - nt_begin, 1) * 32];
        }
        fold_partial<T>(acc, row_max, row_sum, mt, h, src[I::max_index(mt, h) * 32],
                        src[I::sum_index(mt, h) * 32], other, nt_begin, nt_end);
      }
  }
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_w + mt * 16 + (lane >> 2) + 8 * h;
      if (m0 + row >= seq_q) continue;
      const float inv = output_scale(row_sum[mt][h]);
#pragma unroll
      for (int nt = 0; nt < T::kOTiles; ++nt) {
        if (nt < nt_begin || nt >= nt_end) continue;
        *reinterpret_cast<__half2*>(o + (long long)(m0 + row) * T::kHeadDim + nt * 8 +
                                    (lane & 3) * 2) =
            __floats2half2_rn(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
      }
    }
}

// ---------------------------------------------------------------- the kernel

template <class T>
__device__ __forceinline__ void forward(const FaParams& p) {
  // The next kernel's blocks are let in only once every block of this grid has started, and they
  // then wait for this grid's end before they touch memory: letting them in early costs this
  // grid nothing, and their start-up runs under its tail. The wait comes before anything is
  // computed that would live across it (placed after the index arithmetic, it took the default
  // 64x64x4x2 genome from 143 registers to 168 and a 12-byte spill under NVRTC); only TMA's
  // set-up, which leaves nothing in registers, runs ahead of it.
  allow_dependent_launch();
  if constexpr (T::kSplitKV > 1) cluster_arrive_on_start();
  extern __shared__ __align__(128) unsigned char smem_dynamic[];
  unsigned char* smem = smem_dynamic;
  if constexpr (T::kSmemAlign > 0)
    smem += (T::kSmemAlign - (smem_addr(smem_dynamic) & (T::kSmemAlign - 1))) & (T::kSmemAlign - 1);
  // TMA: full[stage] for each K/V stage (K alone with kSplitRefill or kKvBarriers), then Q's,
  // then V's (kSplitRefill: one; kKvBarriers: one per stage); STAGE_RELEASE: left[stage] after
  // them.
  unsigned long long* const full = reinterpret_cast<unsigned long long*>(smem + T::kSmemTiles);
  unsigned long long* const full_q = &full[T::kStages];
  unsigned long long* const full_v = &full[T::kStages + 1];  // kSplitRefill, kKvBarriers
  unsigned* const left = reinterpret_cast<unsigned*>(full + T::kFullBarriers);
  // TMA: the tensor maps and the mbarriers depend on no earlier grid, so one thread readies
  // them while the previous kernel may still run; the copies wait. At the small shapes this
  // took 2 % off a call (1,8,512,64: 4.90 -> 4.81 us by graph replay; bench/NOTES.md).
  if constexpr (T::kTma) {
    if (threadIdx.x == 0) {
      prefetch_tensor_map(p.q_map);
      prefetch_tensor_map(p.k_map);
      prefetch_tensor_map(p.v_map);
#pragma unroll
      for (int i = 0; i < T::kFullBarriers; ++i) mbarrier_init(&full[i], 1);
      if constexpr (T::kStageRelease) {
#pragma unroll
        for (int i = 0; i < T::kStages; ++i) left[i] = 0;
      }
      mbarrier_init_fence();
    }
  }
  wait_for_prerequisite_grids();
  __half* q_tile = reinterpret_cast<__half*>(smem);
  __half* k_tiles = q_tile + T::kQBuffers * T::kQElems;
  __half* v_tiles = k_tiles + T::kStages * T::kKVElems;

  // A launch with less dynamic shared memory than this instantiation needs would corrupt
  // memory silently; stop it loudly instead.
  if (threadIdx.x == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (unsigned)T::kSmemBytes) __trap();
  }

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  // CAUSAL_FOLD numbers the row warps slowest, so that each scheduler (warp % 4) holds a front
  // warp beside a back one: the back half sees the most keys.
  const int warp_m = T::kFold ? warp / T::kWarpsKV : warp % T::kWarpsM;
  const int warp_kv = T::kFold ? warp % T::kWarpsKV : warp / T::kWarpsM;
  const int row_w = warp_m * T::kRowsPerWarp;   // first row of this warp within the block
  const int key_w = warp_kv * T::kKeysPerWarp;  // first key of this warp within a tile
  const int row_wg = row_w & ~63;               // WGMMA: first row of this warp's warpgroup
  const int warpgroup = warp >> 2;

  // Causal blocks near the end of the sequence have the most work: start them first.
  const int m_block = T::kCausal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int m0 = m_block * T::kBlockM;
  // CAUSAL_FOLD: the block's front rows are half-block m_block of the sequence, its back rows
  // half-block 2 * blocks - 1 - m_block; each half's Q tile is a whole BLOCK_M-row tile of which
  // the warps read the half they own (the back one starts half a block early).
  constexpr int kHalfM = T::kBlockM / 2;
  const bool back_half = T::kFold && warp_m >= T::kWarpsM / 2;
  // The first sequence row of the block's Q tile (folded: of its front and its back tile), of the
  // tile this warp reads, and of this warp's own rows.
  const int q0_front = T::kFold ? m_block * kHalfM : m0;
  const int q0_back = (2 * (int)gridDim.x - 2 - m_block) * kHalfM;
  const int q0_own = back_half ? q0_back : q0_front;
  const int row_g = q0_own + row_w;
  const long long bh = blockIdx.y;
  const __half* q = p.q + bh * p.seq_q * T::kHeadDim;
  const __half* k = p.k + bh * p.seq_k * T::kHeadDim;
  const __half* v = p.v + bh * p.seq_k * T::kHeadDim;
  __half* o = p.o + bh * p.seq_q * T::kHeadDim;

  // Keys this block needs: all of them, or (causal) up to its last row's diagonal.
  const int kv_end = T::kCausal ? min(p.seq_k, (T::kFold ? q0_back : m0) + T::kBlockM) : p.seq_k;
  const int all_tiles = (kv_end + T::kBlockN - 1) / T::kBlockN;
  // With SPLIT_KV, block z of the cluster takes its share of those tiles.
  const int tiles_per_split = (all_tiles + T::kSplitKV - 1) / T::kSplitKV;
  const int first_tile = T::kSplitKV > 1 ? (int)blockIdx.z * tiles_per_split : 0;
  const int n_tiles =
      T::kSplitKV > 1 ? max(0, min(all_tiles - first_tile, tiles_per_split)) : all_tiles;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;

  // TMA: the barriers tile t's K and V complete on: K's and V's own with kSplitRefill (one
  // stage) and kKvBarriers, else one per stage for both.
  constexpr bool kOwnVBarrier = T::kSplitRefill || T::kKvBarriers;
  constexpr unsigned kTileBytes = T::kKVElems * 2;
  auto k_bar = [&](int t) { return &full[t % T::kStages]; };
  auto v_bar = [&](int t) { return kOwnVBarrier ? full_v + t % T::kStages : &full[t % T::kStages]; };
  auto expect_kv = [&](int t) {  // one thread
    if constexpr (kOwnVBarrier) {
      mbarrier_expect_bytes(k_bar(t), kTileBytes);
      mbarrier_expect_bytes(v_bar(t), kTileBytes);
    } else {
      mbarrier_expect_bytes(k_bar(t), 2 * kTileBytes);
    }
  };
  auto copy_k = [&](int t) {  // tile t's K into its stage
    tma_load_tile<T, T::kBlockN>(k_tiles + (t % T::kStages) * T::kKVElems, p.k_map,
                                 (first_tile + t) * T::kBlockN, (int)bh, k_bar(t));
  };
  auto copy_v = [&](int t) {
    tma_load_tile<T, T::kBlockN>(v_tiles + (t % T::kStages) * T::kKVElems, p.v_map,
                                 (first_tile + t) * T::kBlockN, (int)bh, v_bar(t));
  };
  // kSplitRefill: K or V of tile t alone, into the one stage, each on its own barrier.
  auto load_k = [&](int t) {
    mbarrier_expect_bytes(k_bar(t), kTileBytes);
    copy_k(t);
  };
  auto load_v = [&](int t) {
    mbarrier_expect_bytes(v_bar(t), kTileBytes);
    copy_v(t);
  };
  auto load_kv = [&](int t) {  // tile t of this block into its stage
    if constexpr (T::kTma) {  // called by one thread
      expect_kv(t);
      copy_k(t);
      copy_v(t);
    } else {
      const int stage = t % T::kStages;
      const int n0 = (first_tile + t) * T::kBlockN;
      load_tile<T, T::kBlockN>(k_tiles + stage * T::kKVElems, k, n0, p.seq_k);
      load_tile<T, T::kBlockN>(v_tiles + stage * T::kKVElems, v, n0, p.seq_k);
    }
  };

  // ---- prologue: Q, then the first kPrefetch K/V tiles, each its own cp.async group (or, with
  // TMA, on its stage's barrier).
  if constexpr (T::kTma) {
    __syncthreads();  // the barriers, initialised before the wait, are visible to every warp
    // One thread tells every barrier what to expect, then issues the copies in the order they
    // are needed. (Sharing the copies out over the warps, lane 0 of each, was 1-11 % slower at
    // the small shapes: bench/NOTES.md.)
    if (threadIdx.x == 0) {
      mbarrier_expect_bytes(full_q, (T::kFold ? 2 : 1) * T::kQElems * 2);
#pragma unroll
      for (int t = 0; t < T::kPrologueTiles; ++t)
        if (t < n_tiles) expect_kv(t);
      tma_load_tile<T, T::kBlockM>(q_tile, p.q_map, q0_front, (int)bh, full_q);
      if constexpr (T::kFold)
        tma_load_tile<T, T::kBlockM>(q_tile + T::kQElems, p.q_map, q0_back, (int)bh, full_q);
#pragma unroll
      for (int t = 0; t < T::kPrologueTiles; ++t)
        if (t < n_tiles) {
          copy_k(t);
          copy_v(t);
        }
    }
  } else {
    load_tile<T, T::kBlockM>(q_tile, q, q0_front, p.seq_q);
    if constexpr (T::kFold) load_tile<T, T::kBlockM>(q_tile + T::kQElems, q, q0_back, p.seq_q);
  }
  if constexpr (T::kCpAsync && !T::kTma) {
    cp_async_commit();
#pragma unroll
    for (int t = 0; t < T::kPrefetch; ++t) {
      if (t < n_tiles) load_kv(t);
      cp_async_commit();
    }
  }

  // mma.sync: Q stays in registers for the whole loop. WGMMA reads it from shared memory.
  unsigned q_frag[T::kWgmma ? 1 : T::kMTiles][T::kWgmma ? 1 : T::kQkSteps][4];
  float acc[T::kMTiles][T::kOTiles][4];
  float row_max[T::kMTiles][2];
  float row_sum[T::kMTiles][2];
  // mma.sync: the rows' sums from the tensor cores, in an n8 accumulator block whose columns are
  // all equal (unused under WGMMA).
  float row_sum_mma[T::kMTiles][1][4];
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) row_sum_mma[mt][0][i] = 0.f;
    row_max[mt][0] = row_max[mt][1] = neg_inf();
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  // PV_ASYNC: the previous tile's P, whose P*V is still in flight.
  unsigned p_prev[T::kPvSteps][4];

  // STAGE_RELEASE: this warp has read tile t's stage for the last time. The last of the block's
  // warps to leave a stage refills it with tile t + STAGES; the fences order every warp's reads
  // of the stage before the copy that overwrites it. Where no tile is left to refill it with,
  // every warp skips the count alike: the atomic's round trip would sit on each warp's path
  // between tiles for nothing (at sequence 512 the prologue has loaded every tile already).
  auto leave_stage = [&](int t) {
    if (lane == 0 && t + T::kStages < n_tiles) {
      __threadfence_block();
      const unsigned left_before = atomicAdd(&left[t % T::kStages], 1u);
      if (left_before % T::kWarps == T::kWarps - 1) {
        __threadfence_block();
        load_kv(t + T::kStages);
      }
    }
  };
  // PINGPONG: warpgroup 0 takes the first turn. Every turn given is taken: a warpgroup gives
  // one per tile but warpgroup 1 not after its last, so no arrival outlives the kernel.
  if (T::kPingPong && warpgroup == 1 && n_tiles > 0) named_barrier_arrive(1, 256);

  // Tile t's scores into probabilities: masked only where the tile crosses the sequence end or
  // the causal diagonal; alpha is what the output accumulated so far must shrink by.
  auto softmax_tile = [&](int t, float (&s)[T::kMTiles][T::kSTiles][4],
                          float (&alpha)[T::kMTiles][2]) {
    const int n0 = (first_tile + t) * T::kBlockN;
    // CAUSAL_FOLD decides per warp: only the key range its rows' diagonal crosses is masked.
    const bool crosses_diagonal = T::kFold ? n0 + key_w + T::kKeysPerWarp - 1 > row_g
                                           : n0 + T::kBlockN - 1 > m0;
    if (n0 + T::kBlockN > p.seq_k || (T::kCausal && crosses_diagonal))
      mask_scores<T>(s, row_g, n0 + key_w, p.seq_k, lane);
    return online_softmax<T>(s, row_max, row_sum, alpha, scale_log2);
  };
  // Without STAGE_RELEASE the next step's copies may overwrite a stage read in step t: a
  // block-wide barrier, but only where that copy refills a stage that held an earlier tile.
  // Where the stages hold every tile (sequence 512 in four 128-key stages) no barrier stands
  // between the tiles, and the warps drift apart until the one after the loop.
  auto close_step = [&](int t) {
    const int next_fill = t + 1 + T::kPrefetch;
    if (T::kSplitRefill || (next_fill < n_tiles && next_fill >= T::kStages)) __syncthreads();
  };

  // One K/V tile. The first is peeled off: with kFirst a constant at each (inlined) call, what
  // differs for it -- Q's fragments, no P*V in flight yet -- costs no branch, and no wgmma sits
  // on a path ptxas must treat as divergent (it would serialise them).
  auto step = [&](int t, const bool kFirst) {
    // CAUSAL_FOLD: keys wholly above this warp's rows add nothing. Tiles only go up in keys, so a
    // warp that skips a tile skips every later one too: it never waits on a barrier's later phase
    // after skipping an earlier one, and it never needs Q's fragments. Under TMA it does not wait
    // for such a tile to land either (the warp of key group 0 in the back rows needs every tile
    // up to kv_end, so each copy is still waited for before the block can leave). The step's
    // closing barrier stays outside the branch: __syncthreads is .aligned, so every warp must
    // reach the same one (with a second one on the skipping path, synccheck reported a
    // divergent barrier).
    const bool keys_visible =
        !T::kFold || (first_tile + t) * T::kBlockN + key_w <= row_g + T::kRowsPerWarp - 1;
    // Tile t must have landed; tile t + kPrefetch starts its copy. PV_ASYNC keeps one stage back
    // from the copies: the previous tile's V is read until this iteration's softmax is done.
    if constexpr (T::kTma) {
      // The stage it refills was last read in the previous iteration, before its closing barrier.
      // (STAGE_RELEASE refills stages in leave_stage instead.)
      if constexpr (T::kSplitRefill) {
        // P*V(t-1) is done (the previous iteration's closing barrier): V(t) may overwrite it.
        if (!kFirst && threadIdx.x == 0) load_v(t);
      } else if (!T::kStageRelease && threadIdx.x == 0 && t + T::kPrefetch < n_tiles) {
        load_kv(t + T::kPrefetch);
      }
      __syncwarp();
      if (keys_visible) {
        if (kFirst) mbarrier_wait(full_q, 0);
        mbarrier_wait(&full[t % T::kStages], (t / T::kStages) & 1);
      }
    } else if constexpr (T::kCpAsync) {
      if (t + T::kPrefetch < n_tiles) load_kv(t + T::kPrefetch);
      cp_async_commit();
      cp_async_wait<T::kPrefetch>();
      if constexpr (T::kWgmma) fence_proxy_async();
      __syncthreads();
    } else {
      load_kv(t);
      __syncthreads();
    }
    if (keys_visible) {
      if constexpr (!T::kWgmma) {
        if (kFirst) {
          const __half* q_own = back_half ? q_tile + T::kQElems : q_tile;
#pragma unroll
          for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
            for (int ks = 0; ks < T::kQkSteps; ++ks) {
              const int row = row_w + mt * 16 + (lane & 15);
              const int col = ks * 16 + (lane >> 4) * 8;
              ldmatrix_x4(q_frag[mt][ks], q_own + tile_offset<T, T::kBlockM>(row, col));
            }
        }
      }

      const int stage = t % T::kStages;
      const __half* k_tile = k_tiles + stage * T::kKVElems;
      const __half* v_tile = v_tiles + stage * T::kKVElems;
      const bool kPvInFlight = T::kPvAsync && !kFirst;

      // ---- S = Q K^T for this warp's rows and keys (with PV_ASYNC, beside the previous P*V).
      float s[T::kMTiles][T::kSTiles][4];
      if constexpr (T::kWgmma) {
        if constexpr (T::kPingPong) named_barrier_sync(1 + warpgroup, 256);  // this one's turn
        wgmma_fence();
        issue_scores_wgmma<T>(s[0], q_tile, k_tile, row_wg, key_w);
        if (kPvInFlight)
          issue_pv_wgmma<T>(acc[0], p_prev, v_tiles + ((t - 1) % T::kStages) * T::kKVElems, key_w);
        if (T::kPingPong && (warpgroup == 0 || t + 1 < n_tiles))
          named_barrier_arrive(2 - warpgroup, 256);  // the other's turn
        if (kPvInFlight) {
          wgmma_wait<1>();  // groups retire in order: the scores are done
        } else {
          wgmma_wait<0>();
        }
        fence_operands(s[0]);
        if constexpr (T::kSplitRefill) {
          __syncthreads();  // every warpgroup is done with K(t)
          if (threadIdx.x == 0 && t + 1 < n_tiles) load_k(t + 1);
        }
      } else {
        scores_mma_sync<T>(s, q_frag, k_tile, key_w, lane);
      }

      float alpha[T::kMTiles][2];
      [[maybe_unused]] const bool rescaled = softmax_tile(t, s, alpha);
      // V(t), copied since the step began (see kWaitVBeforePack).
      if constexpr (T::kWaitVBeforePack) mbarrier_wait(full_v, t & 1);
      auto wait_for_pv = [&] {
        if (kPvInFlight) {
          wgmma_wait<0>();
          fence_operands(acc[0]);
          fence_operands(p_prev);
        }
      };
      // The wait stands outside LAZY_RESCALE's branch below: wgmma.wait_group is .aligned, so every
      // warp of the warpgroup must reach the same one, and that branch is decided per warp (with
      // the wait inside it, a warp that rescaled waited at another pc than one that did not:
      // synccheck's "warpgroup MMA sequence error" once the rows of one warpgroup's warps raised
      // their bases apart, as under the correctness gate's growing scores).
      wait_for_pv();
      // LAZY_RESCALE: the output shrinks only where some row of the warp raised its base, decided
      // per warp so that the branch is uniform; before the first tile there is nothing to shrink.
      if constexpr (T::kLazyRescale) {
        if (!kFirst && __any_sync(0xffffffffu, rescaled)) rescale<T>(acc, row_sum_mma, alpha);
      }
      // The previous tile's V was its stage's last reader (its K was read before).
      if (T::kStageRelease && kPvInFlight) leave_stage(t - 1);
      if constexpr (!T::kLazyRescale) rescale<T>(acc, row_sum_mma, alpha);

      // ---- O += P V: P goes from the score registers straight into A fragments.
      if constexpr (T::kPvAsync) {
#pragma unroll
        for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_prev[kk], s[0], kk);
      } else if constexpr (T::kWgmma) {
        unsigned p_frag[T::kPvSteps][4];
#pragma unroll
        for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_frag[kk], s[0], kk);
        if constexpr (T::kSplitRefill && !T::kWaitVBeforePack) mbarrier_wait(full_v, t & 1);
        wgmma_fence();
        issue_pv_wgmma<T>(acc[0], p_frag, v_tile, key_w);
        wgmma_wait<0>();
        fence_operands(acc[0]);
        fence_operands(p_frag);
      } else {
        if constexpr (T::kKvBarriers) mbarrier_wait(full_v + stage, (t / T::kStages) & 1);
        accumulate_pv_mma_sync<T>(acc, row_sum_mma, s, v_tile, key_w, lane);
      }
    }
    if constexpr (T::kStageRelease) {
      if (!T::kPvAsync) leave_stage(t);  // P*V has retired: done with this stage
    } else {
      close_step(t);
    }
  };

  // QK_AHEAD: tile t+1's QK^T is issued in step t, beside P*V(t-1), so that the tensor cores
  // work on both while tile t's softmax runs; without it each step's scores are issued and
  // waited for before its softmax can start. s holds tile t's scores (issued one step earlier),
  // s_next receives tile t+1's. Groups retire in order, so each wait names how many of the
  // newest may stay in flight.
  auto step_ahead = [&](int t, const bool kFirst, const bool kLast,
                        float (&s)[T::kMTiles][T::kSTiles][4],
                        float (&s_next)[T::kMTiles][T::kSTiles][4]) {
    if constexpr (T::kQkAhead) {  // the body instantiates wgmma shapes only these genomes have
      if (!T::kStageRelease && threadIdx.x == 0 && t + T::kPrefetch < n_tiles)
        load_kv(t + T::kPrefetch);
      __syncwarp();
      const __half* k_next = k_tiles + ((t + 1) % T::kStages) * T::kKVElems;
      auto wait_tile = [&](int u) { mbarrier_wait(&full[u % T::kStages], (u / T::kStages) & 1); };
      if (kFirst) {
        // Nothing to overlap yet: QK^T(0) alone, and QK^T(1) after the first softmax (waiting
        // for tile 1 before it would hold the first softmax for that tile's copy).
        mbarrier_wait(full_q, 0);
        wait_tile(0);
        wgmma_fence();
        issue_scores_wgmma<T>(s[0], q_tile, k_tiles, row_wg, key_w);
        wgmma_wait<0>();
        fence_operands(s[0]);
      } else {
        wgmma_fence();
        issue_pv_wgmma<T>(acc[0], p_prev, v_tiles + ((t - 1) % T::kStages) * T::kKVElems, key_w);
        if (!kLast) {
          wait_tile(t + 1);
          issue_scores_wgmma<T>(s_next[0], q_tile, k_next, row_wg, key_w);
        }
        // In flight: QK^T(t), P*V(t-1) and (not last) QK^T(t+1); the first is needed now.
        if (kLast) {
          wgmma_wait<1>();
        } else {
          wgmma_wait<2>();
        }
        fence_operands(s[0]);
      }
      float alpha[T::kMTiles][2];
      softmax_tile(t, s, alpha);  // never LAZY_RESCALE (KernelTraits)
      if (kFirst) {
        if (!kLast) {
          wait_tile(1);
          wgmma_fence();
          issue_scores_wgmma<T>(s_next[0], q_tile, k_next, row_wg, key_w);
        }
      } else {
        // P*V(t-1) must be done; QK^T(t+1), issued after it, may still run.
        if (kLast) {
          wgmma_wait<0>();
        } else {
          wgmma_wait<1>();
        }
        fence_operands(acc[0]);
        fence_operands(p_prev);
        if constexpr (T::kStageRelease) leave_stage(t - 1);
      }
      rescale<T>(acc, row_sum_mma, alpha);
#pragma unroll
      for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_prev[kk], s[0], kk);
      if constexpr (!T::kStageRelease) close_step(t);
    }
  };

  if constexpr (T::kQkAhead) {
    // Unrolled by two so that the score arrays swap roles without copies.
    float s_a[T::kMTiles][T::kSTiles][4], s_b[T::kMTiles][T::kSTiles][4];
    if (n_tiles == 1) {
      step_ahead(0, true, true, s_a, s_b);
    } else if (n_tiles > 1) {
      step_ahead(0, true, false, s_a, s_b);
      int t = 1;
      for (; t + 2 < n_tiles; t += 2) {
        step_ahead(t, false, false, s_b, s_a);
        step_ahead(t + 1, false, false, s_a, s_b);
      }
      if (t + 1 < n_tiles) {
        step_ahead(t, false, false, s_b, s_a);
        step_ahead(t + 1, false, true, s_a, s_b);
      } else {
        step_ahead(t, false, true, s_b, s_a);
      }
    }
  } else {
    if (n_tiles > 0) step(0, true);
    for (int t = 1; t < n_tiles; ++t) step(t, false);
  }
  if constexpr (T::kPvAsync) {
    // The last tile's P*V. A split without keys issues one too, so that no wgmma sits on a
    // divergent path, and then discards what it read from a stage that was never filled.
    wgmma_fence();
    issue_pv_wgmma<T>(acc[0], p_prev,
                      v_tiles + ((n_tiles + T::kStages - 1) % T::kStages) * T::kKVElems, key_w);
    wgmma_wait<0>();
    fence_operands(acc[0]);
    fence_operands(p_prev);
    if (n_tiles == 0) {
#pragma unroll
      for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[0][nt][i] = 0.f;
    }
    // Other warpgroups may still be reading V for their last P*V, and the epilogue's buffers
    // (the cluster's partials) overlay the V stages, unless kMergeApart moved them.
    if constexpr (!T::kMergeApart) __syncthreads();
  } else {
    // No barrier ended the last tile: every warp must be done with Q and the stages before the
    // epilogue's buffers overlay them (unless kMergeApart moved them).
    if constexpr (!T::kMergeApart) __syncthreads();
  }
  if (n_tiles == 0) {  // a split without keys: nothing waited for Q's copy or synchronised yet
    if constexpr (T::kTma) {
      mbarrier_wait(full_q, 0);
    } else if constexpr (T::kCpAsync) {
      cp_async_wait<0>();
    }
    __syncthreads();
  }

  // Row sums so far are per thread (its 2 of every 8 keys); complete them across the quad. The
  // tensor cores' sums (mma.sync) are whole already.
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

  if constexpr (T::kWarpsKV > 1)
    merge_key_groups<T>(smem, acc, row_max, row_sum, warp_m, warp_kv, lane);
  // The output tile overlays Q (kTmaStore's: the merge buffer's end), which the last iteration's
  // barrier has released.
  if constexpr (T::kTmaStore) {
    store_output_tma<T>(smem, p, m0, (int)bh, acc, row_sum, row_w, warp_kv, lane);
  } else if constexpr (T::kSplitKV == 1) {
    // (Under mma.sync, the only path CAUSAL_FOLD takes, each warp stores its own rows.)
    store_output<T>(smem, o, q0_own, p.seq_q, acc, row_sum, row_w, warp_kv, lane);
  } else {
    merge_cluster_and_store<T>(smem, o, m0, p.seq_q, acc, row_max, row_sum, warp_m, row_w, warp_kv,
                               lane);
  }
}

}  // namespace fa

// The grid's z dimension is SPLIT_KV, grouped into clusters of SPLIT_KV blocks on sm_90.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EVO_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define EVO_CLUSTER_DIMS(x, y, z)
#endif

// __grid_constant__: the TMA path hands the copy engine the address of its tensor maps, which
// must stay in the kernel's parameter space rather than be copied to the stack.
template <int CAUSAL, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int CP_ASYNC,
          int SWIZZLE, int SPLIT_KV, int WGMMA, int PV_ASYNC, int TMA = 0, int STAGE_RELEASE = 0,
          int PINGPONG = 0, int TMA_BOX_ROWS = 64, int QK_AHEAD = 0, int LAZY_RESCALE = 0,
          int CAUSAL_FOLD = 0>
__global__ void __launch_bounds__(WARPS * 32) EVO_CLUSTER_DIMS(1, 1, SPLIT_KV)
    fa_s512_v3_kernel(const __grid_constant__ FaParams p) {
  fa::forward<fa::KernelTraits<CAUSAL, HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, CP_ASYNC, SWIZZLE,
                               SPLIT_KV, WGMMA, PV_ASYNC, TMA, STAGE_RELEASE, PINGPONG,
                               TMA_BOX_ROWS, QK_AHEAD, LAZY_RESCALE, CAUSAL_FOLD>>(p);
}

}  // namespace evo
