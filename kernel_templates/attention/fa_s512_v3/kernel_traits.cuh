#pragma once
// Everything a genome fixes at compile time, in one place: the template arguments as a
// KernelConfig; plan(), the work split, pipeline depth and shared-memory layout they imply; and
// check(), the rules a config must keep for the kernel to implement it (CUTLASS's
// can_implement). KernelTraits hands both to the kernel body as named constants. Plain constexpr
// C++: the worker, the exporter and the tests include it too, and a test holds the search
// space's formulas and constraints (space.json) against plan() and check() for every
// genome, so the two cannot drift.
#include "../dtype.h"
#include "schedule.cuh"

namespace evo {
namespace fa {

// The kernel's template arguments, as values.
struct KernelConfig {
  int dtype, causal, head_dim, block_m, block_n, warps, stages, schedule, swizzle, split_kv, wgmma,
      tma_box_rows, lazy_rescale, causal_fold, pack_gqa, varlen;
  int longest_first = 0;
};

// What a config implies. Each field's comment says why it is as it is; bench/NOTES.md has the
// measurements behind the choices.
struct Plan {
  Pipeline pipeline;
  Mainloop mainloop;
  bool cp_async, tma, stage_release, pv_async, pingpong, qk_ahead;
  // Warp-specialized schedules: a fourth warp group (`producer`) past the WARPS that compute
  // issues every copy and leaves; it keeps `producer_regs` registers a thread and hands the rest
  // to the computing warpgroups (`consumer_regs`; setmaxnreg); 0, no hand-over: with one
  // computing warpgroup a thread may hold 255 registers anyway. block_threads counts both.
  bool producer;
  int producer_regs, consumer_regs;
  // What the hand-over draws on is the block's share, the registers a thread holds at launch
  // times the block's threads: the compiled kernel must hold at least min_registers (the space's
  // launch.min_registers; the worker's compile gate refuses a kernel compiled to fewer).
  int min_registers;
  // Two register sets for P (pingpong at head dim 128 only: it lost on the other blocks it was
  // tried on; and neither warp-specialized, where ptxas spilled it within the consumers' 240
  // registers, nor on 192-key tiles, whose scores alone take 96 registers): each tile's P is
  // packed into its own set before the wait for the previous tile's P*V, and the loop runs
  // unrolled by two.
  int p_buffers;
  // CAUSAL_FOLD on a causal call: the front half of the block's row warps takes rows from the
  // sequence's start, the back half rows from its end; Q then arrives as two tiles. A non-causal
  // call runs the code of CAUSAL_FOLD = 0.
  bool fold;
  // PACK_GQA: a block's rows are the query rows of a whole group of query heads, which share one
  // K/V head (Q is [batch, heads, seq_q, head_dim], so the group's rows are consecutive), and
  // each K/V tile is read once for the group. Q arrives by plain loads and O leaves by plain
  // stores: a tensor map's box stops at one head's rows.
  bool pack;
  // VARLEN (a packed batch, the problem's): each block finds its sequence's rows and lengths in
  // cu_seqlens; Q/O and K/V rows are a token's, heads apart ([tokens, heads, head_dim]). The
  // output leaves by plain stores: a tensor map's box would run on into the next sequence's rows.
  bool varlen;
  int q_buffers;
  bool row_sum_mma;         // mma.sync: P's row sums from the tensor cores
  bool store_from_registers;  // mma.sync: the output leaves from key group 0's registers
  // WGMMA with TMA, one block per row tile: the output as a swizzled tile written with stmatrix
  // and sent out by bulk tensor stores.
  bool tma_store;
  bool panels;  // tiles in 128-byte-swizzled 64-column panels (wgmma's descriptors, TMA)
  // Shared-memory tiles count 16-bit units: an fp16 or bf16 element, or (e4m3) two FP8 ones, so
  // that a k-step of either GEMM is 16 units (32 bytes: k16 of 16-bit types, k32 of FP8) and the
  // swizzled layouts keep their byte geometry. qk_cols: units in a row of Q or K; qk_panel: the
  // units of one swizzle atom's row, 64 (128-byte swizzle) or, for e4m3 at head dim 64, 32
  // (64-byte swizzle).
  int in_bytes, qk_cols, qk_panel;
  // e4m3: V arrives transposed ([head_dim][keys]: FP8 wgmma reads B K-major only), each tile in
  // boxes of 64 keys (32 units, 64-byte swizzle) by head_dim rows.
  bool v_transposed;
  int threads;        // the warps that compute: every row and key of the block is theirs
  int block_threads;  // threads, and the producer warpgroup's
  int warps_m, warps_kv;  // the block's warps: warps_m split the rows, warps_kv the keys
  int rows_per_warp, keys_per_warp;
  int m_tiles, s_tiles, pv_steps, qk_steps, o_tiles, chunks_per_row;
  // K/V tiles whose copies run ahead of the one being computed; P*V in flight holds one stage
  // more (the previous tile's V).
  int prefetch;
  // TMA with one stage and no release: K and V on barriers of their own, refilled apart, K(t+1)
  // once QK^T(t) is done and V(t+1) once P*V(t) is.
  bool split_refill;
  // Where split_refill waits for V(t): before P is packed at head dim 64 (else ptxas keeps the
  // scores and P live at once, and fewer blocks fit an SM).
  bool wait_v_before_pack;
  int prologue_tiles;  // tiles the prologue issues: every stage where stages refill themselves
  // Each stage's K and V complete on barriers of their own: TMA under mma.sync, and the producer
  // on two stages, which frees K's stage once QK^T has read it and V's once P*V has. On two
  // stages that gives the next K the step it lacked to land; on three or more the copies have
  // that step already and the split only adds a wait and an arrive a step, which measured slower
  // (bench/NOTES.md, "Longest-first block order"), so there a stage's K and V are freed together.
  bool kv_barriers;
  int full_barriers;   // TMA: one per stage (K and V, or K), Q's, then V's
  // producer: one per stage (K's, then V's where they are freed apart), then (persistent) Q's
  int empty_barriers;
  // Shared memory: Q tile(s), then STAGES K tiles, then STAGES V tiles (16-bit units). After
  // the main loop the same bytes hold the output tile or the key groups' merge buffer (fp32),
  // unless merge_apart gives those their own bytes past the tiles.
  int q_elems, kv_elems;
  int smem_main;
  int smem_merge;     // key groups 1.. hand their partials to key group 0, in fragment order
  int smem_epilogue;  // the merge buffer, then (tma_store) the output tile
  int smem_align;     // the 128-byte swizzle repeats every 1024 bytes, anchored to addresses
  int smem_barriers;  // TMA: the mbarriers and the release counters, never overlaid
  // TMA blocks whose key groups merge put the merge buffer past the tiles where the block still
  // fits: no block-wide barrier then ends the loop, and key group 0 alone waits for the others.
  bool merge_apart;
  // The persistent warp-specialized schedules (on a dense batch without SPLIT_KV): the grid holds
  // as many blocks as run at once, and each block takes work tile after work tile (block.cuh,
  // PersistentWork), its producer copying the next one's K, V and Q while the computing warps
  // still finish the last; Q gets an empty barrier (the last of empty_barriers). The output tile
  // lies past the stages where it fits there and an SM still holds as many blocks (Q is then
  // freed after the last QK^T), else over Q (16-bit inputs, whose Q tile it fills exactly; Q is
  // then freed once the output's store has read it, and only K and V run ahead).
  bool persistent;
  bool q_freed_after_store;  // persistent with the output tile over Q
  bool epilogue_apart;  // the merge buffer and output tile past the tiles (merge_apart, or persistent)
  int smem_epilogue_at, smem_tiles;
  // SPLIT_KV up to a portable cluster (8): every other block of the cluster writes its partial
  // for this block's columns into an inbox past the barriers, while this block may still be in
  // its main loop. Beyond it (split_in_memory), the blocks are no cluster: a cluster of 16 ran a
  // 32k-key decode step at half the speed of 8 (bench/NOTES.md), so each warp leaves its partial
  // in the workspace and the last to finish merges them.
  bool split_in_memory;
  int cols_per_rank, smem_inbox;
  int smem_bytes;
};

// The most shared memory a block may take on sm_90, the only target TMA compiles for: the host's
// device_limits.h holds it; tests/unit/templates/device_limits_test.cpp fails when this drifts.
constexpr int kSmemOptInSm90 = 227 * 1024;

// The blocks an sm_90 SM holds by their shared memory: the SM's is the opt-in limit and the 1 KB
// the driver keeps for each block.
EVO_HOST_DEVICE constexpr int blocks_by_smem_sm90(int bytes) { return (kSmemOptInSm90 + 1024) / (bytes + 1024); }

// The largest SPLIT_KV whose blocks form a cluster (the portable cluster size).
constexpr int kMaxClusterSplit = 8;
// The cluster a split's blocks form: SPLIT_KV of them, or none (1) where they merge in the workspace.
EVO_HOST_DEVICE constexpr int cluster_size(int split_kv) { return split_kv > kMaxClusterSplit ? 1 : split_kv; }
// A split merged in the workspace counts a row tile's warps in on one of these counters, which
// fill the workspace's start and hold nothing else, so that every call finds them at zero whatever
// the shape or genome of the call before it on the same buffer (the space's SPLIT_COUNTERS).
constexpr int kSplitCounters = 16384;

EVO_HOST_DEVICE constexpr int min_of(int a, int b) { return a < b ? a : b; }
EVO_HOST_DEVICE constexpr int max_of(int a, int b) { return a > b ? a : b; }

// The block's threads: the computing warps, and the warp-specialized schedules' producer warpgroup.
EVO_HOST_DEVICE constexpr int block_threads(int warps, int schedule) {
  return warps * 32 +
         (schedule_info(static_cast<Schedule>(schedule)).pipeline == Pipeline::kTmaProducer ? 128 : 0);
}

EVO_HOST_DEVICE constexpr Plan plan(const KernelConfig& c) {
  Plan p{};
  const ScheduleInfo info = schedule_info(static_cast<Schedule>(c.schedule));
  p.pipeline = info.pipeline;
  p.mainloop = info.mainloop;
  p.cp_async = p.pipeline != Pipeline::kSync;
  p.tma = p.pipeline == Pipeline::kTma || p.pipeline == Pipeline::kTmaRelease ||
          p.pipeline == Pipeline::kTmaProducer;
  p.producer = p.pipeline == Pipeline::kTmaProducer;
  p.stage_release = p.pipeline == Pipeline::kTmaRelease;
  p.pv_async = p.mainloop != Mainloop::kSerial;
  p.pingpong = p.mainloop == Mainloop::kPingpong;
  p.qk_ahead = p.mainloop == Mainloop::kQkAhead;
  p.fold = c.causal_fold != 0 && c.causal != 0;
  p.pack = c.pack_gqa != 0;
  p.varlen = c.varlen != 0;
  p.q_buffers = p.fold ? 2 : 1;
  p.row_sum_mma = !c.wgmma;
  p.store_from_registers = !c.wgmma;
  p.tma_store = c.wgmma && p.tma && c.split_kv == 1 && !p.pack && !p.varlen;
  p.panels = c.wgmma || p.tma;
  p.in_bytes = c.dtype == static_cast<int>(DType::kE4M3) ? 1 : 2;
  p.qk_cols = c.head_dim * p.in_bytes / 2;
  p.qk_panel = min_of(64, p.qk_cols);
  p.v_transposed = p.in_bytes == 1;
  p.threads = c.warps * 32;
  p.block_threads = block_threads(c.warps, c.schedule);
  // Three warpgroups on 64K registers: 24 for the one that only issues copies, 240 for each of
  // the other two (FlashAttention-3's split); the sum stays within the register file. At head
  // dim 64 the computing warps fit the launch's 168 and ptxas compiles them to fewer, which the
  // hand-over cannot start from (min_registers): none there.
  const bool hand_over = p.producer && c.warps == 8 && c.head_dim == 128;
  p.producer_regs = hand_over ? 24 : 0;
  p.consumer_regs = hand_over ? 240 : 0;
  p.min_registers = p.consumer_regs == 0 ? 0
                                         : (128 * p.producer_regs + p.threads * p.consumer_regs +
                                            p.block_threads - 1) / p.block_threads;
  p.warps_m = min_of(c.warps, c.block_m / 16);
  p.warps_kv = c.warps / p.warps_m;
  p.rows_per_warp = c.block_m / p.warps_m;
  p.keys_per_warp = c.block_n / p.warps_kv;
  p.m_tiles = p.rows_per_warp / 16;
  p.p_buffers = p.pingpong && c.head_dim == 128 && !p.producer && p.keys_per_warp <= 128 ? 2 : 1;
  p.s_tiles = p.keys_per_warp / 8;
  p.pv_steps = p.keys_per_warp * p.in_bytes / 32;
  p.qk_steps = p.qk_cols / 16;
  p.o_tiles = c.head_dim / 8;
  p.chunks_per_row = p.qk_cols / 8;
  p.prefetch = c.stages - 1 - (p.pv_async ? 1 : 0);
  p.split_refill = p.pipeline == Pipeline::kTma && c.stages == 1;
  p.wait_v_before_pack = p.split_refill && c.head_dim == 64;
  p.prologue_tiles = p.stage_release || p.split_refill ? c.stages : p.prefetch;
  p.kv_barriers = p.tma && (!c.wgmma || (p.producer && c.stages == 2));
  p.full_barriers = c.stages + 1 + (p.split_refill ? 1 : 0) + (p.kv_barriers ? c.stages : 0);
  p.q_elems = c.block_m * p.qk_cols;
  p.kv_elems = c.block_n * p.qk_cols;
  p.smem_main = 2 * (p.q_buffers * p.q_elems + 2 * c.stages * p.kv_elems);
  p.smem_merge = (p.warps_kv - 1) * c.block_m * 4 * (c.head_dim + 8);
  p.smem_epilogue = p.smem_merge + (p.tma_store ? 2 * c.block_m * c.head_dim : 0);  // O: 16-bit
  p.smem_align = p.panels ? 1024 : 0;
  p.smem_barriers = p.tma ? 128 : 0;
  const int smem_apart = p.smem_main + p.smem_epilogue + p.smem_align + p.smem_barriers;
  const bool epilogue_fits_apart = smem_apart <= kSmemOptInSm90;
  // ... never at the price of a block an SM (persistent or not, a block's work is the same);
  const int smem_overlaid = max_of(p.smem_main, p.smem_epilogue) + p.smem_align + p.smem_barriers;
  p.persistent = info.persistent;
  const bool output_apart = p.persistent && epilogue_fits_apart &&
                            blocks_by_smem_sm90(smem_apart) == blocks_by_smem_sm90(smem_overlaid);
  // ... or else over Q, which it fills exactly with 16-bit inputs (check()): Q is then freed
  // once the output's store has read it, not after the last QK^T.
  p.q_freed_after_store = p.persistent && !output_apart;
  p.empty_barriers = p.producer ? (p.kv_barriers ? 2 : 1) * c.stages + (p.persistent ? 1 : 0) : 0;
  p.merge_apart = c.split_kv == 1 && p.warps_kv > 1 && p.tma && epilogue_fits_apart;
  p.epilogue_apart = p.merge_apart || output_apart;
  p.smem_epilogue_at = p.epilogue_apart ? p.smem_main : 0;
  p.smem_tiles = p.epilogue_apart ? p.smem_main + p.smem_epilogue : max_of(p.smem_main, p.smem_epilogue);
  p.split_in_memory = c.split_kv > 1 && cluster_size(c.split_kv) == 1;
  p.cols_per_rank = (c.head_dim / 8 + c.split_kv - 1) / c.split_kv;
  p.smem_inbox = p.split_in_memory ? 0 : (c.split_kv - 1) * c.block_m * 32 * (p.cols_per_rank + 1);
  p.smem_bytes = p.smem_tiles + p.smem_align + p.smem_barriers + p.smem_inbox;
  return p;
}

// The rules a config must keep for the kernel to implement it, in the order check() tests them.
enum class Unsupported : int {
  kOk = 0,
  kDType,               // DTYPE: 0 (fp16), 1 (bf16) or 2 (e4m3)
  kSchedule,            // SCHEDULE: a code of fa::Schedule
  kHeadDim,             // 64 or 128
  kBlockM,              // whole m16 MMA tiles
  kWarpSplit,           // warps split the rows evenly
  kKeysPerWarp,         // each warp's keys are whole k16 steps of P*V
  kStages,              // 1..4
  kSyncOneStage,        // the sync schedule has one stage
  kSplitKV,             // 1; 2, 4 or 8 (a portable cluster); 16 (merged in the workspace)
  kWgmmaWarpgroups,     // WGMMA: whole warpgroups, each owning 64 rows (one m16 tile per warp)
  kWgmmaN,              // WGMMA: a warpgroup's keys per tile are the N of one wgmma: 32, 64, 128
                        // or 192 (FlashAttention-3's wide FP8 tiles; 96 and 48 have no wgmma here)
  kWideKeysWgmma,       // BLOCK_N 192: wgmma blocks only (mma.sync's 192-key tiles never ran on a GPU)
  kWgmmaCopies,         // WGMMA: cp.async or TMA into swizzled tiles
  kPvAsync,             // P*V in flight: wgmma, and a stage for its V besides the current tile
  kTmaSwizzle,          // TMA: the copies land in swizzled panels
  kTmaMmaSync,          // TMA with mma.sync: whole stages behind the block barrier, no release
  kTmaBoxRows,          // TMA_BOX_ROWS: 32, 64 or 256
  kTmaWholeBoxes,       // TMA: tiles are whole boxes of 32 rows or more
  kTmaBarrierRoom,      // TMA: room for the mbarriers and the release counters
  kPingpongWarps,       // pingpong: two warpgroups
  kQkAheadStages,       // qk_ahead: three stages or more (a step reads three)
  kLazyRescaleQkAhead,  // LAZY_RESCALE: behind its branch ptxas serialises qk_ahead's wgmmas
  kFold,                // CAUSAL_FOLD: mma.sync, no SPLIT_KV, an even number of row warps
  kPackGqa,             // PACK_GQA: 0 or 1, and not with CAUSAL_FOLD (a group's rows are not one sequence)
  kVarlen,              // VARLEN: 0 or 1, and neither folded (the fold pairs rows by the grid's length,
                        // not the sequence's) nor packed (a group's rows are not a token's heads)
  kE4m3,                // e4m3: wgmma (QGMMA) fed by TMA, V^T in boxes of 64 keys, dense batches
                        // with Q by tensor map (no PACK_GQA, no VARLEN)
  kWarpSpecialized,     // warp-specialized: one or two computing warpgroups (WARPS 4 or 8), each
                        // owning 64 rows of its own (a key split between them hung on the H200,
                        // on a packed batch's staged store; kept out until a GPU run passes one),
                        // no SPLIT_KV (a cluster's barriers would wait for the producer, which has left)
  kLongestFirst,        // LONGEST_FIRST: 0 or 1, and not with CAUSAL_FOLD (whose blocks' work is even)
  kPersistent,          // the persistent schedules: a dense batch (no SPLIT_KV, PACK_GQA or VARLEN:
                        // one work tile is one (row tile, head)) and an output tile that lies
                        // apart or fills Q (16-bit inputs; e4m3's is twice Q's bytes)
  kStagedKeySplit,      // key groups that merge apart from the tiles (TMA, wgmma) do not stage the
                        // output (PACK_GQA, VARLEN): every such genome failed compute-sanitizer on
                        // the H200 (racecheck, and synccheck once key groups 1.. waited at the merge
                        // barrier instead: bench/NOTES.md), so they are kept out until one passes
};

EVO_HOST_DEVICE constexpr int box_rows_of(int tile_rows, int box_rows) { return min_of(tile_rows, box_rows); }

EVO_HOST_DEVICE constexpr Unsupported check(const KernelConfig& c) {
  using U = Unsupported;
  if (c.dtype != static_cast<int>(DType::kF16) && c.dtype != static_cast<int>(DType::kBF16) &&
      c.dtype != static_cast<int>(DType::kE4M3))
    return U::kDType;
  if (!schedule_is_valid(c.schedule)) return U::kSchedule;
  if (c.head_dim != 64 && c.head_dim != 128) return U::kHeadDim;
  if (c.block_m < 16 || c.block_m % 16 != 0 || c.warps < 1) return U::kBlockM;
  const Plan p = plan(c);
  if (c.warps % p.warps_m != 0 || c.block_m % (16 * p.warps_m) != 0) return U::kWarpSplit;
  if (p.keys_per_warp < 16 || p.keys_per_warp % 16 != 0) return U::kKeysPerWarp;
  if (c.stages < 1 || c.stages > 4) return U::kStages;
  if (c.stages != 1 && !p.cp_async) return U::kSyncOneStage;
  if (c.split_kv != 1 && c.split_kv != 2 && c.split_kv != 4 && c.split_kv != 8 && c.split_kv != 16)
    return U::kSplitKV;
  if (c.wgmma && (c.warps % 4 != 0 || c.block_m % 64 != 0 || p.m_tiles != 1))
    return U::kWgmmaWarpgroups;
  if (c.wgmma && p.keys_per_warp != 32 && p.keys_per_warp != 64 && p.keys_per_warp != 128 &&
      p.keys_per_warp != 192)
    return U::kWgmmaN;
  if (c.block_n == 192 && !c.wgmma) return U::kWideKeysWgmma;
  if (c.wgmma && (!p.cp_async || !c.swizzle)) return U::kWgmmaCopies;
  if (p.pv_async && (!c.wgmma || c.stages < 2)) return U::kPvAsync;
  if (p.tma && !c.swizzle) return U::kTmaSwizzle;
  if (p.tma && !c.wgmma && (c.stages < 2 || p.stage_release)) return U::kTmaMmaSync;
  if (p.tma && c.tma_box_rows != 32 && c.tma_box_rows != 64 && c.tma_box_rows != 256)
    return U::kTmaBoxRows;
  if (p.tma && (c.block_m < 32 || c.block_m % box_rows_of(c.block_m, c.tma_box_rows) != 0 ||
                c.block_n % box_rows_of(c.block_n, c.tma_box_rows) != 0))
    return U::kTmaWholeBoxes;
  if (p.tma && 8 * (p.full_barriers + p.empty_barriers) + 4 * c.stages > p.smem_barriers)
    return U::kTmaBarrierRoom;
  if (p.pingpong && c.warps != 8) return U::kPingpongWarps;
  if (p.qk_ahead && c.stages < 3) return U::kQkAheadStages;
  if (c.lazy_rescale && p.qk_ahead) return U::kLazyRescaleQkAhead;
  if (c.causal_fold && (c.wgmma || c.split_kv != 1 || p.warps_m % 2 != 0)) return U::kFold;
  if ((c.pack_gqa != 0 && c.pack_gqa != 1) || (c.pack_gqa && c.causal_fold)) return U::kPackGqa;
  if ((c.varlen != 0 && c.varlen != 1) || (c.varlen && (c.causal_fold || c.pack_gqa))) return U::kVarlen;
  if (p.in_bytes == 1 && (!c.wgmma || !p.tma || c.pack_gqa || c.varlen || c.block_n % 64 != 0))
    return U::kE4m3;
  if (p.producer && ((c.warps != 4 && c.warps != 8) || p.warps_kv != 1 || c.split_kv != 1))
    return U::kWarpSpecialized;
  if ((c.longest_first != 0 && c.longest_first != 1) || (c.longest_first && c.causal_fold))
    return U::kLongestFirst;
  if (p.persistent && (c.split_kv != 1 || c.pack_gqa || c.varlen || (p.q_freed_after_store && p.in_bytes != 2)))
    return U::kPersistent;
  if (p.merge_apart && c.wgmma && (c.pack_gqa || c.varlen)) return U::kStagedKeySplit;
  return U::kOk;
}

// An instantiation whose config breaks a rule fails to compile here, and the error names the rule
// (the enumerator in this template's argument).
template <Unsupported kRule>
struct KernelCannotImplement {
  static_assert(kRule == Unsupported::kOk,
                "this genome breaks a rule of fa::check(): the enumerator in the instantiation "
                "above names it");
  static constexpr bool kOk = true;
};

template <int DTYPE_, int CAUSAL_, int HEAD_DIM_, int BLOCK_M_, int BLOCK_N_, int WARPS_,
          int STAGES_, int SCHEDULE_, int SWIZZLE_, int SPLIT_KV_, int WGMMA_, int TMA_BOX_ROWS_,
          int LAZY_RESCALE_, int CAUSAL_FOLD_, int PACK_GQA_, int VARLEN_, int LONGEST_FIRST_>
struct KernelTraits {
  static constexpr KernelConfig kConfig{DTYPE_,   CAUSAL_, HEAD_DIM_,    BLOCK_M_,      BLOCK_N_,
                                        WARPS_,   STAGES_, SCHEDULE_,    SWIZZLE_,      SPLIT_KV_,
                                        WGMMA_,   TMA_BOX_ROWS_, LAZY_RESCALE_, CAUSAL_FOLD_, PACK_GQA_,
                                        VARLEN_,  LONGEST_FIRST_};
  static_assert(KernelCannotImplement<check(kConfig)>::kOk, "");
  static constexpr Plan kPlan = plan(kConfig);

  static constexpr DType kDType = static_cast<DType>(DTYPE_);
  static constexpr DType kOutDType = output_dtype(kDType);
  static constexpr bool kCausal = CAUSAL_ != 0;
  static constexpr int kHeadDim = HEAD_DIM_;
  static constexpr int kBlockM = BLOCK_M_;
  static constexpr int kBlockN = BLOCK_N_;
  static constexpr int kWarps = WARPS_;
  static constexpr int kStages = STAGES_;
  static constexpr Schedule kSchedule = static_cast<Schedule>(SCHEDULE_);
  static constexpr bool kSwizzle = SWIZZLE_ != 0;
  static constexpr int kSplitKV = SPLIT_KV_;
  static constexpr bool kWgmma = WGMMA_ != 0;
  static constexpr bool kLazyRescale = LAZY_RESCALE_ != 0;
  static constexpr bool kLongestFirst = LONGEST_FIRST_ != 0;

  static constexpr Pipeline kPipeline = kPlan.pipeline;
  static constexpr Mainloop kMainloop = kPlan.mainloop;
  static constexpr bool kCpAsync = kPlan.cp_async;
  static constexpr bool kTma = kPlan.tma;
  static constexpr bool kStageRelease = kPlan.stage_release;
  static constexpr bool kPvAsync = kPlan.pv_async;
  static constexpr bool kPingPong = kPlan.pingpong;
  static constexpr bool kQkAhead = kPlan.qk_ahead;
  static constexpr bool kProducer = kPlan.producer;
  static constexpr int kProducerRegs = kPlan.producer_regs;
  static constexpr int kConsumerRegs = kPlan.consumer_regs;
  static constexpr int kPBuffers = kPlan.p_buffers;
  static constexpr bool kFold = kPlan.fold;
  static constexpr bool kPackGqa = kPlan.pack;
  static constexpr bool kVarlen = kPlan.varlen;
  static constexpr int kQBuffers = kPlan.q_buffers;
  static constexpr bool kRowSumMma = kPlan.row_sum_mma;
  static constexpr bool kStoreFromRegisters = kPlan.store_from_registers;
  static constexpr bool kTmaStore = kPlan.tma_store;
  static constexpr bool kPanels = kPlan.panels;
  static constexpr int kInBytes = kPlan.in_bytes;
  static constexpr int kQkCols = kPlan.qk_cols;    // 16-bit units in a row of Q or K
  static constexpr int kQkPanel = kPlan.qk_panel;  // ... in a row of one swizzle atom
  static constexpr bool kVTransposed = kPlan.v_transposed;
  static constexpr int kVtPanel = 32;              // e4m3 V^T: 64 keys a row, 64-byte swizzle
  // A tensor map's column coordinate per unit: e4m3 maps count bytes.
  static constexpr int kMapColsPerUnit = 2 / kInBytes;

  static constexpr int kThreads = kPlan.threads;  // the computing threads
  static constexpr int kBlockThreads = kPlan.block_threads;
  static constexpr int kWarpsM = kPlan.warps_m;
  static constexpr int kWarpsKV = kPlan.warps_kv;
  static constexpr int kRowsPerWarp = kPlan.rows_per_warp;
  static constexpr int kKeysPerWarp = kPlan.keys_per_warp;
  static constexpr int kMTiles = kPlan.m_tiles;    // m16 tiles per warp
  static constexpr int kSTiles = kPlan.s_tiles;    // n8 tiles of S per warp
  static constexpr int kPvSteps = kPlan.pv_steps;  // k16 (e4m3: k32) steps of P*V
  static constexpr int kQkSteps = kPlan.qk_steps;  // k16 (e4m3: k32) steps of Q*K^T
  static constexpr int kOTiles = kPlan.o_tiles;    // n8 tiles of O
  static constexpr int kChunksPerRow = kPlan.chunks_per_row;  // 16-byte chunks per smem row of Q, K
  static constexpr int kPrefetch = kPlan.prefetch;
  static constexpr bool kSplitRefill = kPlan.split_refill;
  static constexpr bool kWaitVBeforePack = kPlan.wait_v_before_pack;
  static constexpr int kPrologueTiles = kPlan.prologue_tiles;
  static constexpr bool kKvBarriers = kPlan.kv_barriers;
  static constexpr int kFullBarriers = kPlan.full_barriers;
  static constexpr int kEmptyBarriers = kPlan.empty_barriers;

  static constexpr int kQElems = kPlan.q_elems;
  static constexpr int kKVElems = kPlan.kv_elems;
  static constexpr int kSmemMain = kPlan.smem_main;
  static constexpr int kSmemMerge = kPlan.smem_merge;
  static constexpr int kSmemEpilogue = kPlan.smem_epilogue;
  static constexpr int kSmemAlign = kPlan.smem_align;
  static constexpr int kSmemBarriers = kPlan.smem_barriers;
  static constexpr bool kMergeApart = kPlan.merge_apart;
  static constexpr bool kPersistent = kPlan.persistent;
  static constexpr bool kQFreedAfterStore = kPlan.q_freed_after_store;
  static constexpr bool kEpilogueApart = kPlan.epilogue_apart;
  static constexpr int kSmemEpilogueAt = kPlan.smem_epilogue_at;
  static constexpr int kSmemTiles = kPlan.smem_tiles;
  static constexpr bool kSplitInMemory = kPlan.split_in_memory;
  static constexpr int kClusterSize = cluster_size(kSplitKV);
  static constexpr int kColsPerRank = kPlan.cols_per_rank;  // SPLIT_KV: n8 tiles per block
  static constexpr int kSmemInbox = kPlan.smem_inbox;
  static constexpr int kSmemBytes = kPlan.smem_bytes;

  // A bulk tensor copy moves one box: a panel's width (kQkPanel units of Q and K; 64 columns of
  // O) by TMA_BOX_ROWS rows of one (batch, head), or by the tile's rows where the tile is
  // shorter: 256 means each tile in one box per panel. The host encodes the same boxes (the
  // space's launch formulas tell encode_attention_tensor_maps both heights).
  static constexpr int kTmaBoxRows = TMA_BOX_ROWS_;
  template <int kTileRows>
  static constexpr int kTmaBoxRowsOf = box_rows_of(kTileRows, kTmaBoxRows);
};

}  // namespace fa
}  // namespace evo
