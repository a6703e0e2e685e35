// fa_s512_v3: FlashAttention-2 forward, fp16 Q/K/V/O, fp32 accumulation and online softmax.
// Layout [batch, heads, seq, head_dim], contiguous. Tensor cores through mma.sync m16n8k16, fed by
// ldmatrix from shared memory. Compiled at run time by NVRTC (one instantiation per genome), and
// exported by `evoctl export`, as one text that includes nothing beyond the CUDA toolkit's headers
// (see the end of this comment).
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
//
// The pieces, one job each, are in fa_s512_v3/; this file holds the kernel body and its entry
// point. The build inlines the pieces into one text (cmake/EmbedText.cmake), which is what NVRTC
// compiles and `evoctl export` writes out.
#include "fa_s512_v3/params.cuh"
#include "fa_s512_v3/kernel_traits.cuh"
#include "fa_s512_v3/ptx.cuh"
#include "fa_s512_v3/ptx_wgmma.cuh"
#include "fa_s512_v3/ptx_tma.cuh"
#include "fa_s512_v3/ptx_cluster.cuh"
#include "fa_s512_v3/smem_tiles.cuh"
#include "fa_s512_v3/tile_step.cuh"
#include "fa_s512_v3/epilogue.cuh"

namespace evo {
namespace fa {

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
  const __half* q = static_cast<const __half*>(p.q) + bh * p.seq_q * T::kHeadDim;
  const __half* k = static_cast<const __half*>(p.k) + bh * p.seq_k * T::kHeadDim;
  const __half* v = static_cast<const __half*>(p.v) + bh * p.seq_k * T::kHeadDim;
  __half* o = static_cast<__half*>(p.o) + bh * p.seq_q * T::kHeadDim;

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
  // PV_ASYNC: the previous tile's P, whose P*V is still in flight, in p_a; with two P sets
  // (kPBuffers) the tiles alternate between p_a and p_b, and the last one's ends in p_a.
  using PFrags = unsigned[T::kPvSteps][4];
  PFrags p_a, p_b;

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
  // p_prev holds the previous tile's P (PV_ASYNC), p_this receives this tile's: the same set
  // with one P set, the other one with two.
  auto step = [&](int t, const bool kFirst, PFrags& p_prev, PFrags& p_this) {
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
      // Two P sets: this tile's P is packed now, into registers no P*V reads, and pinned here so
      // that the packing is not moved after the wait below.
      if constexpr (T::kPvAsync && T::kPBuffers == 2) {
#pragma unroll
        for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_this[kk], s[0], kk);
        fence_operands(p_this);
      }
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
        if constexpr (T::kPBuffers == 1) {  // (two sets: packed above)
#pragma unroll
          for (int kk = 0; kk < T::kPvSteps; ++kk) pack_p<T>(p_this[kk], s[0], kk);
        }
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
                        float (&s_next)[T::kMTiles][T::kSTiles][4], PFrags& p_prev) {
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
      step_ahead(0, true, true, s_a, s_b, p_a);
    } else if (n_tiles > 1) {
      step_ahead(0, true, false, s_a, s_b, p_a);
      int t = 1;
      for (; t + 2 < n_tiles; t += 2) {
        step_ahead(t, false, false, s_b, s_a, p_a);
        step_ahead(t + 1, false, false, s_a, s_b, p_a);
      }
      if (t + 1 < n_tiles) {
        step_ahead(t, false, false, s_b, s_a, p_a);
        step_ahead(t + 1, false, true, s_a, s_b, p_a);
      } else {
        step_ahead(t, false, true, s_b, s_a, p_a);
      }
    }
  } else if constexpr (T::kPBuffers == 2) {
    // Unrolled by two so that the P sets swap roles without copies; tile t's P is in p_a for
    // even t. Where the last tile is odd its P is copied into p_a (registers only: no wgmma on
    // a branch).
    if (n_tiles > 0) step(0, true, p_b, p_a);
    int t = 1;
    for (; t + 1 < n_tiles; t += 2) {
      step(t, false, p_a, p_b);
      step(t + 1, false, p_b, p_a);
    }
    if (t < n_tiles) {
      step(t, false, p_a, p_b);
#pragma unroll
      for (int kk = 0; kk < T::kPvSteps; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) p_a[kk][i] = p_b[kk][i];
    }
  } else {
    if (n_tiles > 0) step(0, true, p_a, p_a);
    for (int t = 1; t < n_tiles; ++t) step(t, false, p_a, p_a);
  }
  if constexpr (T::kPvAsync) {
    // The last tile's P*V. A split without keys issues one too, so that no wgmma sits on a
    // divergent path, and then discards what it read from a stage that was never filled.
    wgmma_fence();
    issue_pv_wgmma<T>(acc[0], p_a,
                      v_tiles + ((n_tiles + T::kStages - 1) % T::kStages) * T::kKVElems, key_w);
    wgmma_wait<0>();
    fence_operands(acc[0]);
    fence_operands(p_a);
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
