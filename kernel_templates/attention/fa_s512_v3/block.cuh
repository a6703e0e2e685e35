#pragma once
// What every schedule of a block shares: where its shared memory holds what, which rows, keys
// and K/V tiles are its own and each warp's, and the mask of a tile's scores.
#include "gemms.cuh"
#include "kernel_traits.cuh"
#include "../params.h"
#include "ptx.cuh"
#include "smem_tiles.cuh"

namespace evo {
namespace fa {

// The dynamic shared memory's base (rounded up to the 128-byte swizzle's 1024-byte period for
// panel tiles) and the TMA barriers past the tiles: full[stage] for each K/V stage (K alone with
// kSplitRefill or kKvBarriers), then Q's, then V's (kSplitRefill: one; kKvBarriers: one per
// stage). After them a producer's empty barriers, which the computing warps free (one a stage;
// K's, then V's, where they are freed apart), or STAGE_RELEASE's per-stage counters of the warps
// that have left it.
// Nothing here reads global memory, so it is set up before the wait for the previous grid.
template <class T>
struct SharedLayout {
  unsigned char* base;
  unsigned long long* full;
  unsigned long long* full_q;
  unsigned long long* full_v;
  unsigned long long* empty;
  unsigned* left;

  __device__ __forceinline__ explicit SharedLayout(unsigned char* dynamic) : base(dynamic) {
    if constexpr (T::kSmemAlign > 0)
      base += (T::kSmemAlign - (smem_addr(dynamic) & (T::kSmemAlign - 1))) & (T::kSmemAlign - 1);
    full = reinterpret_cast<unsigned long long*>(base + T::kSmemTiles);
    full_q = &full[T::kStages];
    full_v = &full[T::kStages + 1];
    empty = full + T::kFullBarriers;
    left = reinterpret_cast<unsigned*>(empty + T::kEmptyBarriers);
  }
  // A persistent block's Q tile is free for the next work tile's Q: the last of its empty barriers.
  __device__ __forceinline__ unsigned long long* q_empty() const { return empty + T::kEmptyBarriers - 1; }
};

// A launch with less dynamic shared memory than this instantiation needs would corrupt memory
// silently; stop it loudly instead.
template <class T>
__device__ __forceinline__ void trap_if_short_of_shared_memory() {
  if (threadIdx.x == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (unsigned)T::kSmemBytes) __trap();
  }
}

// A barrier across the warps that compute: __syncthreads, except where a producer warpgroup has
// left the block (a barrier over every thread would then wait for it).
template <class T>
__device__ __forceinline__ void block_sync() {
  if constexpr (T::kProducer) {
    named_barrier_sync(kComputeBarrier, T::kThreads);
  } else {
    __syncthreads();
  }
}

// The K/V heads of a call: FaParams reads heads_kv 0 (a caller that sets none) as `heads`.
__device__ __forceinline__ int kv_heads(const FaParams& p) { return p.heads_kv > 0 ? p.heads_kv : p.heads; }

// LONGEST_FIRST: the L2 bytes that the K/V of the heads running side by side may fill
// (FlashAttention-3's figure for its causal scheduler, on cards with 50 MB of L2 or more: every
// sm_90 part).
constexpr unsigned kL2SectionBytes = 32u << 20;

// Which row tile and row group (blockIdx.y's meaning: (batch, query head), or with PACK_GQA
// (batch, K/V head)) a block computes. A causal block sees the keys up to its last row, so the
// row tiles near a sequence's end are the heaviest: by default each head's row tiles start
// heaviest first, head after head (blockIdx.y, then blockIdx.x reversed). LONGEST_FIRST reads
// the linear block index, in whose order blocks roughly start, as row tile (heaviest first) and
// then head, within sections of heads whose K/V fit in kL2SectionBytes: every head's heaviest
// tile starts before any head's lighter one, which leaves the light tiles for the tail, and the
// heads that run side by side still share L2. CAUSAL_FOLD evens out the work itself.
struct TileCoord {
  int m_block;
  unsigned row_group;  // as blockIdx.y: never negative, which the address arithmetic relies on
};
// Work tile (x, y) of a tiles x groups grid: the block's own (blockIdx), or a persistent block's
// current one (persistent_coord).
template <class T>
__device__ __forceinline__ TileCoord tile_coord(const FaParams& p, int x, unsigned y, int tiles, int groups) {
  if constexpr (!T::kCausal) {
    return {x, y};
  } else if constexpr (!T::kLongestFirst) {
    return {tiles - 1 - x, y};
  } else {
    // A row group's share of K/V: grouped query heads share their K/V head (PACK_GQA's row
    // group is the K/V head itself). 32-bit arithmetic: one division here, two below.
    const unsigned sharing = T::kPackGqa ? 1u : (unsigned)(p.heads / kv_heads(p));
    const unsigned head_bytes = (unsigned)max(p.seq_k, 1) * (2u * T::kHeadDim * T::kInBytes);
    const int section = (int)min((unsigned)groups, max(1u, kL2SectionBytes / head_bytes * sharing));
    const int linear = (int)y * tiles + x;
    const int first = linear / (section * tiles) * section;
    const int heads = min(section, groups - first);
    const int in_section = linear - first * tiles;
    const int rank = in_section / heads;
    return {tiles - 1 - rank, (unsigned)(first + (in_section - rank * heads))};
  }
}
// A block's own tile. (Spelled out, not one call of the form above: that one call compiled the
// longest-first kernels to other SASS, and these are the kernels the stored times measured.)
template <class T>
__device__ __forceinline__ TileCoord tile_coord(const FaParams& p) {
  const int tiles = (int)gridDim.x;
  if constexpr (!T::kCausal) {
    return {(int)blockIdx.x, blockIdx.y};
  } else if constexpr (!T::kLongestFirst) {
    return {tiles - 1 - (int)blockIdx.x, blockIdx.y};
  } else {
    return tile_coord<T>(p, (int)blockIdx.x, blockIdx.y, tiles, (int)gridDim.y);
  }
}

// PERSISTENT (the plan's): the grid holds as many blocks as the device runs at once, and block b
// takes work tiles b, b + gridDim.x, ... of the row tiles x row groups that one block per tile
// would have had, in the order (tile_coord) those blocks would have started in.
struct PersistentWork {
  int tiles, groups, total;
  template <class T>
  __device__ __forceinline__ static PersistentWork of(const FaParams& p) {
    const int tiles = (p.seq_q + T::kBlockM - 1) / T::kBlockM;
    const int groups = p.batch * p.heads;  // (no PACK_GQA, no VARLEN: the plan's rule)
    return {tiles, groups, tiles * groups};
  }
  template <class T>
  __device__ __forceinline__ TileCoord coord(const FaParams& p, int w) const {
    const int y = w / tiles;
    return tile_coord<T>(p, w - y * tiles, (unsigned)y, tiles, groups);
  }
};

template <class T>
struct Block {
  using E = Element<T>;
  const FaParams& p;
  const SharedLayout<T>& smem;
  E* q_tile;   // kQBuffers tiles of BLOCK_M rows
  E* k_tiles;  // STAGES tiles of BLOCK_N rows
  E* v_tiles;
  int warp, lane;
  // The block's warps form a WARPS_M x WARPS_KV grid: warp_m's rows, warp_kv's keys of every tile.
  int warp_m, warp_kv;
  int row_w;      // first row of this warp within the block
  int key_w;      // first key of this warp within a tile
  int row_wg;     // WGMMA: first row of this warp's warpgroup
  int warpgroup;
  int m0;         // first sequence row of the block's row tile (unfolded)
  bool back_half;  // CAUSAL_FOLD: this warp's rows are the block's back half
  // The first sequence row of the block's Q tile (folded: of its front and its back tile), and of
  // this warp's own rows.
  int q0_front, q0_back, q0_own, row_g;
  long long bh;     // the Q/O view's (batch, query head), or (PACK_GQA) (batch, K/V head)
  long long bh_kv;  // (batch, K/V head): grouped query heads share one
  // Causal: query row i sees keys 0 .. i + causal_shift (seq_k - seq_q: the diagonal aligned
  // bottom-right, as a KV cache needs; 0 for equal lengths).
  int causal_shift;
  // The rows of this block's Q/O view: seq_q, or (PACK_GQA) seq_q for each query head of the
  // group, head after head; row r is then position r % seq_q.
  int rows;
  // VARLEN: the block's sequence's queries and keys, and its first row in Q/O and in K/V (whose
  // rows hold every head of a token). Unset for a dense batch: read them through seq_q(), seq_k(),
  // q_map_row() and kv_map_row(), which give a dense batch's constants.
  int own_seq_q, own_seq_k, q_row0, k_row0;
  // The slice of the tensor maps' third dimension this block reads: (batch, head) for a dense
  // batch, the head for a packed one (whose maps run over every token of the call).
  int q_slice, kv_slice;
  const E* q;
  const E* k;
  const E* v;
  OutElement<T>* o;
  int first_tile;  // SPLIT_KV: this block's share of the tiles starts here
  int n_tiles;     // the K/V tiles this block reads
  float scale_log2;  // the softmax scale in base 2, times (e4m3) Q's and K's scales
  float v_scale;     // e4m3: V's scale, which the output takes once; 1 otherwise
  // PERSISTENT: the K/V tiles the block's earlier work tiles took through the stages (tile t of
  // this one is the block's (iter0 + t)-th: its stage and barrier phase), and how many work tiles
  // came before this one (Q's phase). Both 0 otherwise.
  int iter0, work;

  // A block's own tile, or (PERSISTENT) work tile w of `work_tiles`.
  __device__ __forceinline__ Block(const FaParams& params, const SharedLayout<T>& layout,
                                   const PersistentWork* work_tiles = nullptr, int w = 0, int iter0_ = 0,
                                   int work_ = 0)
      : p(params), smem(layout), iter0(iter0_), work(work_) {
    q_tile = reinterpret_cast<E*>(smem.base);
    k_tiles = q_tile + T::kQBuffers * T::kQElems;
    v_tiles = k_tiles + T::kStages * T::kKVElems;
    warp = threadIdx.x >> 5;
    lane = threadIdx.x & 31;
    // CAUSAL_FOLD numbers the row warps slowest, so that each scheduler (warp % 4) holds a front
    // warp beside a back one: the back half sees the most keys.
    warp_m = T::kFold ? warp / T::kWarpsKV : warp % T::kWarpsM;
    warp_kv = T::kFold ? warp % T::kWarpsKV : warp / T::kWarpsM;
    row_w = warp_m * T::kRowsPerWarp;
    key_w = warp_kv * T::kKeysPerWarp;
    row_wg = row_w & ~63;
    warpgroup = warp >> 2;
    const TileCoord coord = coord_of(work_tiles, w);
    const int m_block = coord.m_block;
    m0 = m_block * T::kBlockM;
    // CAUSAL_FOLD: the block's front rows are half-block m_block of the sequence, its back rows
    // half-block 2 * blocks - 1 - m_block; each half's Q tile is a whole BLOCK_M-row tile of which
    // the warps read the half they own (the back one starts half a block early).
    constexpr int kHalfM = T::kBlockM / 2;
    back_half = T::kFold && warp_m >= T::kWarpsM / 2;
    q0_front = T::kFold ? m_block * kHalfM : m0;
    q0_back = (2 * (int)gridDim.x - 2 - m_block) * kHalfM;
    q0_own = back_half ? q0_back : q0_front;
    row_g = q0_own + row_w;
    bh = coord.row_group;
    const int heads_kv = kv_heads(p);
    const int group = p.heads / heads_kv;
    const int batch_index = (int)coord.row_group / p.heads, head = (int)coord.row_group % p.heads;
    if constexpr (T::kVarlen) {
      q_row0 = p.cu_seqlens_q[batch_index];
      own_seq_q = p.cu_seqlens_q[batch_index + 1] - q_row0;
      k_row0 = p.cu_seqlens_k[batch_index];
      own_seq_k = p.cu_seqlens_k[batch_index + 1] - k_row0;
    }
    const int seq_q = this->seq_q(), seq_k = this->seq_k();
    if constexpr (T::kPackGqa) {
      // The grid's y is (batch, K/V head); the group's query heads are consecutive, so its rows
      // are one [group * seq_q][head_dim] matrix starting at its first head's.
      bh_kv = bh;
      rows = seq_q * group;
    } else {
      bh_kv = batch_index * heads_kv + head / group;
      rows = seq_q;
    }
    causal_shift = T::kCausal ? seq_k - seq_q : 0;
    // (Q, K and V rows are kQkCols units; e4m3's V^T is read through its tensor map only.)
    if constexpr (T::kVarlen) {
      q_slice = head;
      kv_slice = head / group;
      q = static_cast<const E*>(p.q) + ((long long)q_row0 * p.heads + head) * T::kQkCols;
      k = static_cast<const E*>(p.k) + ((long long)k_row0 * heads_kv + kv_slice) * T::kQkCols;
      v = static_cast<const E*>(p.v) + ((long long)k_row0 * heads_kv + kv_slice) * T::kQkCols;
      o = static_cast<OutElement<T>*>(p.o) + ((long long)q_row0 * p.heads + head) * T::kHeadDim;
    } else {
      q_slice = (int)bh;
      kv_slice = (int)bh_kv;
      q = static_cast<const E*>(p.q) + bh * rows * T::kQkCols;
      k = static_cast<const E*>(p.k) + bh_kv * seq_k * T::kQkCols;
      v = static_cast<const E*>(p.v) + bh_kv * seq_k * T::kQkCols;
      o = static_cast<OutElement<T>*>(p.o) + bh * rows * T::kHeadDim;
    }
    // Keys this block needs: all of them, or (causal) up to its last row's diagonal. A packed
    // block whose rows run past its first head's holds that head's last position.
    const int last_row_end = T::kPackGqa ? min(seq_q, m0 + T::kBlockM) : (T::kFold ? q0_back : m0) + T::kBlockM;
    const int kv_end = T::kCausal ? min(seq_k, last_row_end + causal_shift) : seq_k;
    const int all_tiles = (kv_end + T::kBlockN - 1) / T::kBlockN;
    // With SPLIT_KV, block z of the cluster takes its share of those tiles.
    const int tiles_per_split = (all_tiles + T::kSplitKV - 1) / T::kSplitKV;
    first_tile = T::kSplitKV > 1 ? (int)blockIdx.z * tiles_per_split : 0;
    n_tiles = T::kSplitKV > 1 ? max(0, min(all_tiles - first_tile, tiles_per_split)) : all_tiles;
    scale_log2 = p.softmax_scale * 1.4426950408889634f;
    v_scale = 1.f;
    if constexpr (T::kDType == DType::kE4M3) {  // (no PACK_GQA: bh is one query head's)
      scale_log2 *= p.q_scale[bh] * p.k_scale[bh_kv];
      v_scale = p.v_scale[bh_kv];
    }
  }

  __device__ __forceinline__ int seq_q() const { return T::kVarlen ? own_seq_q : p.seq_q; }
  __device__ __forceinline__ int seq_k() const { return T::kVarlen ? own_seq_k : p.seq_k; }
  // The tensor maps' row of the sequence's query row r, and of its key row r.
  __device__ __forceinline__ int q_map_row(int r) const { return T::kVarlen ? q_row0 + r : r; }
  __device__ __forceinline__ int kv_map_row(int r) const { return T::kVarlen ? k_row0 + r : r; }
  // Elements between consecutive rows of Q/O and of K/V: a packed batch's rows hold every head.
  // (O's, whatever the dtype; Q's and K/V's of 16-bit types only: e4m3 reads its inputs through
  // tensor maps and has no packed batches.)
  __device__ __forceinline__ int q_stride() const { return T::kVarlen ? p.heads * T::kHeadDim : T::kHeadDim; }
  __device__ __forceinline__ int kv_stride() const {
    return T::kVarlen ? kv_heads(p) * T::kHeadDim : T::kHeadDim;
  }

  __device__ __forceinline__ TileCoord coord_of(const PersistentWork* work_tiles, int w) const {
    if constexpr (T::kPersistent) {
      return work_tiles->coord<T>(p, w);
    } else {
      return tile_coord<T>(p);
    }
  }
  // Tile t's place in the block's stream of K/V tiles, from which its stage and phase follow.
  __device__ __forceinline__ int slot(int t) const {
    if constexpr (T::kPersistent) {
      return iter0 + t;
    } else {
      return t;
    }
  }
  __device__ __forceinline__ int stage(int t) const { return slot(t) % T::kStages; }
  __device__ __forceinline__ const E* k_stage(int t) const { return k_tiles + stage(t) * T::kKVElems; }
  __device__ __forceinline__ const E* v_stage(int t) const { return v_tiles + stage(t) * T::kKVElems; }
  // The Q tile this warp's rows are in (CAUSAL_FOLD's back half has its own).
  __device__ __forceinline__ const E* q_own() const {
    return back_half ? q_tile + T::kQElems : q_tile;
  }

  // CAUSAL_FOLD: keys wholly above this warp's rows add nothing. Tiles only go up in keys, so a
  // warp that skips a tile skips every later one too.
  __device__ __forceinline__ bool keys_visible(int t) const {
    return !T::kFold ||
           (first_tile + t) * T::kBlockN + key_w <= row_g + T::kRowsPerWarp - 1 + causal_shift;
  }

  // Masks tile t's scores only where the tile crosses the sequence end or the causal diagonal
  // (CAUSAL_FOLD decides per warp: only the key range its rows' diagonal crosses is masked).
  __device__ __forceinline__ void mask(int t, float (&s)[T::kMTiles][T::kSTiles][4]) const {
    const int n0 = (first_tile + t) * T::kBlockN;
    // (A packed block's rows may hold position 0 of a head: its first position counts as 0.)
    const int first_position = T::kPackGqa ? 0 : T::kFold ? row_g : m0;
    const int first_keys = T::kFold ? key_w + T::kKeysPerWarp : T::kBlockN;
    const bool crosses_diagonal = n0 + first_keys - 1 > first_position + causal_shift;
    if (n0 + T::kBlockN > seq_k() || (T::kCausal && crosses_diagonal))
      mask_scores<T>(s, row_g, n0 + key_w, seq_k(), causal_shift, seq_q(), lane);
  }
};

}  // namespace fa
}  // namespace evo
