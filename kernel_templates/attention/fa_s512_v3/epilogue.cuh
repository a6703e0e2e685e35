#pragma once
// After the last tile: the key groups' partial results merged (through shared memory within a
// block, through distributed shared memory across a SPLIT_KV cluster or through the workspace
// beyond one), normalised and stored.
#include "block.cuh"
#include "kernel_traits.cuh"
#include "../params.h"
#include "ptx.cuh"
#include "ptx_cluster.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"
#include "smem_tiles.cuh"

namespace evo {
namespace fa {

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
// kMergeApart they are then done: the output leaves from key group 0's registers or through
// the tensor map (check(): kStagedKeySplit keeps a staged store away from this path).
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
    block_sync<T>();
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
  if constexpr (!T::kStoreFromRegisters && !T::kTmaStore) block_sync<T>();
}

// What a row's accumulated output is multiplied by: 1 / its softmax sum, or 0 for a row that saw
// no key (a split without keys, a row past the sequence's end).
__device__ __forceinline__ float output_scale(float row_sum) {
  return row_sum > 0.f ? 1.f / row_sum : 0.f;
}

// Normalises key group 0's rows and writes them out: straight from its registers
// (kStoreFromRegisters), or staged as a tile in shared memory and copied out in 16-byte rows
// by every thread of the block. Row r of the output is o + r * o_stride.
template <class T>
__device__ __forceinline__ void store_output(unsigned char* smem, OutElement<T>* o, int o_stride, int m0, int seq_q,
                                             const float (&acc)[T::kMTiles][T::kOTiles][4],
                                             const float (&row_sum)[T::kMTiles][2], int row_w,
                                             int warp_kv, int lane) {
  OutElement<T>* o_tile = reinterpret_cast<OutElement<T>*>(smem);
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
          OutElement<T>* dst = T::kStoreFromRegisters ? o + (long long)(m0 + row) * o_stride + col
                                               : o_tile + tile_offset<T, T::kBlockM>(row, col);
          *reinterpret_cast<unsigned*>(dst) =
              pack2<T::kOutDType>(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
        }
      }
  }
  if constexpr (T::kStoreFromRegisters) return;
  block_sync<T>();
  constexpr int kChunksPerRow = T::kHeadDim / 8;  // O's 16-byte chunks
  constexpr int kChunks = T::kBlockM * kChunksPerRow;
  constexpr int kIters = (kChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = threadIdx.x + i * T::kThreads;
    if (kChunks % T::kThreads != 0 && c >= kChunks) break;
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    if (m0 + row < seq_q)
      *reinterpret_cast<uint4*>(o + (long long)(m0 + row) * o_stride + col) =
          *reinterpret_cast<const uint4*>(o_tile + tile_offset<T, T::kBlockM>(row, col));
  }
}

// kTmaStore: key group 0 normalises its rows into a tile in TMA's swizzled panels, past the
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
  OutElement<T>* o_tile = reinterpret_cast<OutElement<T>*>(smem + T::kSmemEpilogueAt + T::kSmemMerge);
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
      r[0] = pack2<T::kOutDType>(acc[mt][nt][0] * inv0, acc[mt][nt][1] * inv0);
      r[1] = pack2<T::kOutDType>(acc[mt][nt][2] * inv1, acc[mt][nt][3] * inv1);
      r[2] = pack2<T::kOutDType>(acc[mt][nt + 1][0] * inv0, acc[mt][nt + 1][1] * inv0);
      r[3] = pack2<T::kOutDType>(acc[mt][nt + 1][2] * inv1, acc[mt][nt + 1][3] * inv1);
      stmatrix_x4(o_tile + tile_offset<T, T::kBlockM>(row, (nt + (lane >> 4)) * 8), r);
    }
  }
  fence_proxy_async();  // the tile's writes, visible to the copy engine
  named_barrier_sync(kOutputBarrier, T::kWarpsM * 32);
  if (threadIdx.x == 0) tma_store_tile<T, T::kBlockM>(o_tile, p.o_map, m0, bh);
}

// Normalises key group 0's rows, output n8 tiles [nt_begin, nt_end), and writes them out from its
// registers.
template <class T>
__device__ __forceinline__ void store_rows_from_registers(OutElement<T>* o, int o_stride, int m0, int seq_q,
                                                          const float (&acc)[T::kMTiles][T::kOTiles][4],
                                                          const float (&row_sum)[T::kMTiles][2], int row_w,
                                                          int lane, int nt_begin, int nt_end) {
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
        *reinterpret_cast<unsigned*>(o + (long long)(m0 + row) * o_stride + nt * 8 + (lane & 3) * 2) =
            pack2<T::kOutDType>(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
      }
    }
}

// SPLIT_KV: the cluster's blocks hold partial results for the same rows over different keys, and
// block r writes output columns [r, r + 1) * kColsPerRank. Key group 0 of each block stores, into
// every other block's inbox, that block's columns of its partial plus the rows' running max and
// sum (remote stores: no round trip), and arrives at the cluster barrier; past it, every block
// folds what its inbox received into its own registers and writes its columns. One barrier: no
// block reads another's memory, so none has to stay for the others (it replaced reads of the
// others' partials between two barriers: bench/NOTES.md).
template <class T>
__device__ __forceinline__ void merge_cluster_and_store(unsigned char* smem, OutElement<T>* o,
                                                        int o_stride, int m0, int seq_q,
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
  store_rows_from_registers<T>(o, o_stride, m0, seq_q, acc, row_sum, row_w, lane, nt_begin, nt_end);
}

// One row half of the last warp's merge (kSplitInMemory): every split's running max first (one
// round of loads), then the output as the splits' partials weighted by exp2(their max - the
// rows' max), summed in block order and read kMergeBatch splits at a time. The loads of a batch
// are all in flight at once, where an online fold would wait for each split's in turn.
template <class T, class PartialAt>
__device__ __forceinline__ void fold_splits_from_memory(const PartialAt& partial,
                                                        float (&acc)[T::kMTiles][T::kOTiles][4],
                                                        float (&row_sum)[T::kMTiles][2], int mt,
                                                        int h) {
  using F = Fragment<T>;
  constexpr int kMergeBatch = 2;
  static_assert(T::kSplitKV % kMergeBatch == 0, "the splits come in whole batches");
  float weight[T::kSplitKV];
  float rows_max = neg_inf();
#pragma unroll
  for (int z = 0; z < T::kSplitKV; ++z) {
    weight[z] = __ldcg(partial(z) + F::max_index(mt, h) * 32);
    rows_max = fmaxf(rows_max, weight[z]);
  }
  const float base = rows_max == neg_inf() ? 0.f : rows_max;  // no split saw a key: every weight 0
  float sum = 0.f;
#pragma unroll
  for (int z = 0; z < T::kSplitKV; ++z) {
    weight[z] = fast_exp2(weight[z] - base);
    sum += weight[z] * __ldcg(partial(z) + F::sum_index(mt, h) * 32);
  }
  row_sum[mt][h] = sum;
#pragma unroll
  for (int nt = 0; nt < T::kOTiles; ++nt) acc[mt][nt][2 * h] = acc[mt][nt][2 * h + 1] = 0.f;
#pragma unroll
  for (int z0 = 0; z0 < T::kSplitKV; z0 += kMergeBatch) {
    float other[kMergeBatch][T::kOTiles][2];
#pragma unroll
    for (int b = 0; b < kMergeBatch; ++b)
#pragma unroll
      for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i)
          other[b][nt][i] = __ldcg(partial(z0 + b) + F::acc_index(mt, nt, 2 * h + i) * 32);
#pragma unroll
    for (int b = 0; b < kMergeBatch; ++b)
#pragma unroll
      for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i) acc[mt][nt][2 * h + i] += weight[z0 + b] * other[b][nt][i];
  }
}

// SPLIT_KV beyond a cluster (kSplitInMemory): each warp of key group 0 leaves its partial in the
// workspace, in fragment order (coalesced, and read back by the same lane of the same warp of
// another block, which holds the same rows and columns), and counts itself in on its rows'
// counter; the warp that counts last merges every partial, stores the rows, and sets the counter
// back to zero, so that the workspace is as the next launch expects it. It sums the partials
// (fold_splits_from_memory), only for rows it stores, in block order, its own read back like the
// others, so that the result does not depend on which block finished last (repeated launches are
// bitwise identical). Layout (the space's workspace_bytes): kSplitCounters counters, [row
// tile][WARPS_M] of them in use, then [row tiles][SPLIT_KV][WARPS_M][F::kVals][32] floats.
template <class T>
__device__ __forceinline__ void merge_in_memory_and_store(void* workspace, OutElement<T>* o, int o_stride,
                                                          int m0, int seq_q,
                                                          float (&acc)[T::kMTiles][T::kOTiles][4],
                                                          float (&row_max)[T::kMTiles][2],
                                                          float (&row_sum)[T::kMTiles][2], int warp_m,
                                                          int row_w, int warp_kv, int lane) {
  using F = Fragment<T>;
  constexpr int kWarpFloats = F::kVals * 32;
  static_assert(T::kWarpsM * kWarpFloats == T::kBlockM * (T::kHeadDim + 8),
                "the space's workspace_bytes counts a block's partial as BLOCK_M * (HEAD_DIM + 8) floats");
  // A warp whose rows all lie past the block's last (a decode step's PACK_GQA tile holds a few real
  // rows) has nothing to store; the same warp of every block of the split skips too (they share
  // m0 and seq_q), so its counter is never touched.
  if (warp_kv != 0 || m0 + row_w >= seq_q) return;
  if (workspace == nullptr) __trap();  // the launch gave none: the space's workspace_bytes was ignored
  const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
  if ((tile + 1) * T::kWarpsM > kSplitCounters) __trap();  // the space's split_counters_fit
  unsigned* counter = static_cast<unsigned*>(workspace) + tile * T::kWarpsM + warp_m;
  float* partials = reinterpret_cast<float*>(static_cast<unsigned*>(workspace) + kSplitCounters);
  const auto partial = [&](int z) {
    return partials + ((tile * T::kSplitKV + z) * T::kWarpsM + warp_m) * kWarpFloats + lane;
  };
  write_fragment<T>(partial((int)blockIdx.z), acc, row_max, row_sum);
  __threadfence();  // this lane's partial is visible device-wide before the count says it is there
  __syncwarp();
  unsigned counted = 0;
  if (lane == 0) counted = atomicAdd(counter, 1u);
  counted = __shfl_sync(0xffffffffu, counted, 0);
  if (counted != T::kSplitKV - 1) return;
  __threadfence();  // the others' partials, ordered after their counts
  if (lane == 0) *counter = 0u;
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (m0 + row_w + mt * 16 + (lane >> 2) + 8 * h >= seq_q) continue;  // not stored
      fold_splits_from_memory<T>(partial, acc, row_sum, mt, h);
    }
  store_rows_from_registers<T>(o, o_stride, m0, seq_q, acc, row_sum, row_w, lane, 0, T::kOTiles);
}

}  // namespace fa
}  // namespace evo
