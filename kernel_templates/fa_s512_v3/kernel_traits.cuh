#pragma once
// Everything a genome fixes at compile time: the genes as named constants, the work split and
// shared-memory layout they imply, and static checks that refuse a tile shape the kernel cannot
// run. The kernel body (../fa_s512_v3.cuh) reads only these. Plain constexpr C++: host code
// includes it too, so that the search space's formulas can be checked against it.
#include "../attention/dtype.h"
#include "schedule.cuh"

namespace evo {
namespace fa {

template <int DTYPE_, int CAUSAL_, int HEAD_DIM_, int BLOCK_M_, int BLOCK_N_, int WARPS_,
          int STAGES_, int SCHEDULE_, int SWIZZLE_, int SPLIT_KV_, int WGMMA_, int TMA_BOX_ROWS_,
          int LAZY_RESCALE_, int CAUSAL_FOLD_>
struct KernelTraits {
  static constexpr DType kDType = static_cast<DType>(DTYPE_);
  static constexpr bool kCausal = CAUSAL_ != 0;
  static constexpr int kHeadDim = HEAD_DIM_;
  static constexpr int kBlockM = BLOCK_M_;
  static constexpr int kBlockN = BLOCK_N_;
  static constexpr int kWarps = WARPS_;
  static constexpr int kStages = STAGES_;
  static constexpr Schedule kSchedule = static_cast<Schedule>(SCHEDULE_);
  static constexpr Pipeline kPipeline = schedule_info(kSchedule).pipeline;
  static constexpr Mainloop kMainloop = schedule_info(kSchedule).mainloop;
  static constexpr bool kSwizzle = SWIZZLE_ != 0;
  static constexpr int kSplitKV = SPLIT_KV_;
  static constexpr bool kWgmma = WGMMA_ != 0;
  // What the schedule implies, as the rest of the kernel reads it.
  static constexpr bool kCpAsync = kPipeline != Pipeline::kSync;
  static constexpr bool kTma = kPipeline == Pipeline::kTma || kPipeline == Pipeline::kTmaRelease;
  static constexpr bool kStageRelease = kPipeline == Pipeline::kTmaRelease;
  static constexpr bool kPvAsync = kMainloop != Mainloop::kSerial;
  static constexpr bool kPingPong = kMainloop == Mainloop::kPingpong;
  static constexpr bool kQkAhead = kMainloop == Mainloop::kQkAhead;
  // PINGPONG at head dim 128: two register sets for P, so that each tile's P is packed into its
  // own set before the wait for the previous tile's P*V rather than into the registers that P*V
  // still reads, and the loop runs unrolled by two. It lost on the other blocks it was tried on
  // (bench/NOTES.md), so it is a property of these blocks, not a gene.
  static constexpr int kPBuffers = kPingPong && kHeadDim == 128 ? 2 : 1;
  static constexpr bool kLazyRescale = LAZY_RESCALE_ != 0;
  // CAUSAL_FOLD: the front half of the block's row warps takes rows from the sequence's start,
  // the back half rows from its end (see ../fa_s512_v3.cuh). Q then arrives as two tiles, one
  // per half, in a second Q buffer. A non-causal call is not folded and keeps one Q buffer: it
  // runs the code of CAUSAL_FOLD = 0, and a run of non-causal shapes keeps only that value
  // (the gene's used_when in the space).
  static constexpr bool kFold = CAUSAL_FOLD_ != 0 && kCausal;
  static constexpr int kQBuffers = kFold ? 2 : 1;
  // Row sums of P from the tensor cores (see ../fa_s512_v3.cuh).
  static constexpr bool kRowSumMma = !kWgmma;
  // The output leaves from key group 0's registers instead of through a staged tile and a
  // block-wide barrier: faster for the mma.sync blocks, slower for the wgmma ones measured
  // (bench/NOTES.md).
  static constexpr bool kStoreFromRegisters = !kWgmma;
  // WGMMA with TMA (one block per row tile): key group 0 writes its normalised rows into a
  // swizzled tile with stmatrix, and one thread sends the tile out as bulk tensor stores, instead
  // of 32-bit stores, a block-wide barrier and a 16-byte copy by every thread. (Under mma.sync it
  // lost to the register store: bench/NOTES.md.)
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
  // each tile only when it is needed; with it one stage keeps the copies off the critical path
  // in the least shared memory (bench/NOTES.md).
  static constexpr bool kSplitRefill = kPipeline == Pipeline::kTma && kStages == 1;
  // Where kSplitRefill waits for V(t). At head dim 64, before P is packed: waiting between the
  // packing and P*V, ptxas keeps the scores and P's fragments live at once, and fewer blocks fit
  // an SM. At 128 the block count does not change and the early wait costs time
  // (bench/NOTES.md).
  static constexpr bool kWaitVBeforePack = kSplitRefill && kHeadDim == 64;
  // STAGE_RELEASE refills a stage as soon as its last reader leaves it, so every stage is filled
  // up front and the copies then run kStages tiles ahead; so does kSplitRefill's one stage.
  static constexpr int kPrologueTiles = kStageRelease || kSplitRefill ? kStages : kPrefetch;
  // TMA under mma.sync: each stage's K and V complete on barriers of their own, so a tile's
  // QK^T and softmax start once its K has landed while its V is still on the way (the first
  // tile's V lands last: phase stamps in bench/NOTES.md).
  static constexpr bool kKvBarriers = kTma && !kWgmma;
  // TMA's "full" mbarriers: one per stage (K and V, or K alone with kSplitRefill or
  // kKvBarriers), one for Q, then V's: one with kSplitRefill, one per stage with kKvBarriers.
  static constexpr int kFullBarriers =
      kStages + 1 + (kSplitRefill ? 1 : 0) + (kKvBarriers ? kStages : 0);

  // Shared memory: Q tile, then STAGES K tiles, then STAGES V tiles (all of the 16-bit element
  // type). After the main loop the same bytes hold either the output tile or the cross-warp merge
  // buffer (fp32),
  // unless kMergeApart gives those their own bytes past the tiles.
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  static constexpr int kSmemMain = 2 * (kQBuffers * kQElems + 2 * kStages * kKVElems);
  // Partial results pass between warps, and between the blocks of a cluster, in fragment order:
  // per row pair of an m16 tile, the output columns plus running max and sum (HEAD_DIM + 8
  // floats per row over a warp's 32 lanes). Key groups 1.. hand theirs to key group 0 ...
  static constexpr int kFragmentBytesPerRow = 4 * (kHeadDim + 8);
  static constexpr int kSmemMerge = (kWarpsKV - 1) * kBlockM * kFragmentBytesPerRow;
  // kTmaStore: the output tile follows the merge buffer, which key group 0 may still be
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
  // and key group 0 waits for them alone (a gain at the small shapes: bench/NOTES.md). The
  // buffers' own bytes can cost blocks that share an SM one block per SM.
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

  static_assert(kDType == DType::kF16 || kDType == DType::kBF16, "DTYPE: 0 (fp16) or 1 (bf16)");
  static_assert(schedule_is_valid(SCHEDULE_), "SCHEDULE: a code of fa::Schedule");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dim must be 64 or 128");
  static_assert(kBlockM % 16 == 0, "BLOCK_M must be whole m16 MMA tiles");
  static_assert(kWarps % kWarpsM == 0 && kBlockM % (16 * kWarpsM) == 0,
                "warps must split the rows evenly");
  static_assert(kKeysPerWarp % 16 == 0, "each warp's keys must be whole k16 steps of P*V");
  static_assert(kStages >= 1 && kStages <= 4, "STAGES in 1..4");
  static_assert(kStages == 1 || kCpAsync, "the sync schedule has one stage");
  static_assert(kSplitKV == 1 || kSplitKV == 2 || kSplitKV == 4 || kSplitKV == 8,
                "SPLIT_KV is a portable cluster size: 1, 2, 4 or 8");
  static_assert(!kWgmma || (kWarps % 4 == 0 && kBlockM % 64 == 0 && kMTiles == 1),
                "WGMMA: whole warpgroups, each owning 64 rows (one m16 tile per warp)");
  static_assert(!kWgmma || kKeysPerWarp == 32 || kKeysPerWarp == 64 || kKeysPerWarp == 128,
                "WGMMA: each warpgroup's keys per tile are the N of one wgmma: 32, 64 or 128");
  static_assert(!kWgmma || (kCpAsync && kSwizzle), "WGMMA: cp.async or TMA into swizzled tiles");
  static_assert(
      !kPvAsync || (kWgmma && kStages >= 2),
      "P*V in flight: an asynchronous wgmma, and a stage for its V besides the current tile");
  static_assert(!kTma || kSwizzle, "TMA: the copies land in swizzled panels");
  static_assert(!kTma || kWgmma || (kStages >= 2 && !kStageRelease),
                "TMA with mma.sync: whole stages, refilled behind the block-wide barrier (no "
                "release schedule)");
  static_assert(!kTma || kTmaBoxRows == 32 || kTmaBoxRows == 64 || kTmaBoxRows == 256,
                "TMA_BOX_ROWS: 32, 64 or 256 (a whole tile)");
  static_assert(!kTma || (kBlockM >= 32 && kBlockM % kTmaBoxRowsOf<kBlockM> == 0 &&
                          kBlockN % kTmaBoxRowsOf<kBlockN> == 0),
                "TMA: tiles are whole boxes of 32 rows or more");
  static_assert(8 * kFullBarriers + 4 * kStages <= kSmemBarriers || !kTma,
                "TMA: room for the mbarriers and the stage counters");
  static_assert(!kPingPong || kWarps == 8, "pingpong: turns pass between two warpgroups");
  // Step t reads three stages: V(t-1) under the P*V in flight, V(t) for the next step's, and
  // K(t+1) under the scores issued early; with two, tile t+1 would refill the stage P*V(t-1)
  // still reads.
  static_assert(!kQkAhead || kStages >= 3, "qk_ahead: three stages or more");
  // Under qk_ahead the next tile's scores are in flight while the output is rescaled; behind the
  // lazy rescale's branch ptxas serialises the wgmmas instead (its warning C7514).
  static_assert(!kLazyRescale || !kQkAhead, "LAZY_RESCALE: not with the qk_ahead schedules");
  // Folding pairs a front row warp with a back one, and a wgmma warpgroup's 64 rows or a split's
  // cluster would each need a fold of their own.
  static_assert(CAUSAL_FOLD_ == 0 || (!kWgmma && kSplitKV == 1 && kWarpsM % 2 == 0),
                "CAUSAL_FOLD: mma.sync, no SPLIT_KV, an even number of row warps");
};

}  // namespace fa
}  // namespace evo
