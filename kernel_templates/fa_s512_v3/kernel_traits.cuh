#pragma once
// Everything a genome fixes at compile time: the genes as named constants, the work split and
// shared-memory layout they imply, and static checks that refuse a tile shape the kernel cannot
// run. The kernel body (../fa_s512_v3.cuh) reads only these.

namespace evo {
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
  // PINGPONG at head dim 128: two register sets for P, so that each tile's P is packed into its
  // own set before the wait for the previous tile's P*V rather than into the registers that P*V
  // still reads, and the loop runs unrolled by two. Measured (bench/NOTES.md, H100 and H200):
  // 2-6 % off the head-dim-128 PINGPONG blocks, but 1-5 % onto the head-dim-64 64x128 blocks and
  // 22-28 % onto the one-warpgroup head-dim-128 PV_ASYNC block; so these blocks only, not a gene.
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

}  // namespace fa
}  // namespace evo
