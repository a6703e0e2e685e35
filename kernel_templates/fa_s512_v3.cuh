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
};

namespace fa {

template <int CAUSAL_, int HEAD_DIM_, int BLOCK_M_, int BLOCK_N_, int WARPS_, int STAGES_,
          int CP_ASYNC_, int SWIZZLE_, int SPLIT_KV_>
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

  // Shared memory: Q tile, then STAGES K tiles, then STAGES V tiles (all fp16). After the main
  // loop the same bytes hold either the output tile (fp16) or the cross-warp merge buffer (fp32).
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  static constexpr int kSmemMain = 2 * (kQElems + 2 * kStages * kKVElems);
  static constexpr int kMergeStride = kHeadDim + 2;  // o[0..D), running max, running sum
  static constexpr int kSmemMerge = kWarpsKV > 1 ? 4 * kWarpsKV * kBlockM * kMergeStride : 0;
  // SPLIT_KV: this block's partial result (unnormalised output, max, sum per row), after the
  // merge buffer, for the cluster's blocks to read.
  static constexpr int kSmemPartial = kSplitKV > 1 ? 4 * kBlockM * kMergeStride : 0;
  static constexpr int kSmemEpilogue = kSmemMerge + kSmemPartial;
  static constexpr int kSmemBytes = kSmemMain > kSmemEpilogue ? kSmemMain : kSmemEpilogue;

  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dim must be 64 or 128");
  static_assert(kBlockM % 16 == 0, "BLOCK_M must be whole m16 MMA tiles");
  static_assert(kWarps % kWarpsM == 0 && kBlockM % (16 * kWarpsM) == 0,
                "warps must split the rows evenly");
  static_assert(kKeysPerWarp % 16 == 0, "each warp's keys must be whole k16 steps of P*V");
  static_assert(kStages >= 1 && kStages <= 4, "STAGES in 1..4");
  static_assert(kStages == 1 || kCpAsync, "a pipeline deeper than 1 needs cp.async");
  static_assert(kSplitKV == 1 || kSplitKV == 2 || kSplitKV == 4 || kSplitKV == 8,
                "SPLIT_KV is a portable cluster size: 1, 2, 4 or 8");
};

// ---------------------------------------------------------------- PTX wrappers

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (tails past the sequence end).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
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
__device__ __forceinline__ float load_peer_f32(unsigned addr) {
  float v = 0.f;
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
#endif
  return v;
}
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::);
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

// Element offset of (row, col) in a [rows][HEAD_DIM] fp16 tile. With SWIZZLE the 16-byte chunk
// index is XORed with the row, so the 8 rows one ldmatrix reads fall in 8 different bank groups.
template <class T>
__device__ __forceinline__ int tile_offset(int row, int col) {
  if constexpr (T::kSwizzle) {
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
    __half* s = tile + tile_offset<T>(row, col);
    if constexpr (T::kCpAsync) {
      cp_async_16(s, g, valid);
    } else {
      uint4 x = valid ? *reinterpret_cast<const uint4*>(g) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(s) = x;
    }
  }
}

// ---------------------------------------------------------------- the kernel

template <class T>
__device__ __forceinline__ void forward(const FaParams& p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* q_tile = reinterpret_cast<__half*>(smem_raw);
  __half* k_tiles = q_tile + T::kQElems;
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
  const int warp_m = warp % T::kWarpsM;
  const int warp_kv = warp / T::kWarpsM;
  const int row_w = warp_m * T::kRowsPerWarp;   // first row of this warp within the block
  const int key_w = warp_kv * T::kKeysPerWarp;  // first key of this warp within a tile

  // Causal blocks near the end of the sequence have the most work: start them first.
  const int m_block = T::kCausal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int m0 = m_block * T::kBlockM;
  const long long bh = blockIdx.y;
  const __half* q = p.q + bh * p.seq_q * T::kHeadDim;
  const __half* k = p.k + bh * p.seq_k * T::kHeadDim;
  const __half* v = p.v + bh * p.seq_k * T::kHeadDim;
  __half* o = p.o + bh * p.seq_q * T::kHeadDim;

  // Keys this block needs: all of them, or (causal) up to its last row's diagonal.
  const int kv_end = T::kCausal ? min(p.seq_k, m0 + T::kBlockM) : p.seq_k;
  const int all_tiles = (kv_end + T::kBlockN - 1) / T::kBlockN;
  // With SPLIT_KV, block z takes its share of those tiles; the last block to finish merges.
  const int tiles_per_split = (all_tiles + T::kSplitKV - 1) / T::kSplitKV;
  const int first_tile = T::kSplitKV > 1 ? (int)blockIdx.z * tiles_per_split : 0;
  const int n_tiles = T::kSplitKV > 1 ? max(0, min(all_tiles - first_tile, tiles_per_split))
                                      : all_tiles;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;

  // ---- prologue: Q, then the first STAGES-1 K/V tiles, each its own cp.async group.
  load_tile<T, T::kBlockM>(q_tile, q, m0, p.seq_q);
  if constexpr (T::kCpAsync) {
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < T::kStages - 1; ++s) {
      if (s < n_tiles) {
        const int n0 = (first_tile + s) * T::kBlockN;
        load_tile<T, T::kBlockN>(k_tiles + s * T::kKVElems, k, n0, p.seq_k);
        load_tile<T, T::kBlockN>(v_tiles + s * T::kKVElems, v, n0, p.seq_k);
      }
      cp_async_commit();
    }
    cp_async_wait<T::kStages - 1>();
  }
  __syncthreads();

  // Q stays in registers for the whole loop.
  unsigned q_frag[T::kMTiles][T::kQkSteps][4];
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int ks = 0; ks < T::kQkSteps; ++ks) {
      const int row = row_w + mt * 16 + (lane & 15);
      const int col = ks * 16 + (lane >> 4) * 8;
      ldmatrix_x4(q_frag[mt][ks], q_tile + tile_offset<T>(row, col));
    }

  float acc[T::kMTiles][T::kOTiles][4];
  float row_max[T::kMTiles][2];
  float row_sum[T::kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < T::kOTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
    row_max[mt][0] = row_max[mt][1] = neg_inf();
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t % T::kStages;
    if constexpr (T::kCpAsync) {
      const int ahead = t + T::kStages - 1;
      if (T::kStages > 1 && ahead < n_tiles) {
        const int s = ahead % T::kStages;
        const int n_ahead = (first_tile + ahead) * T::kBlockN;
        load_tile<T, T::kBlockN>(k_tiles + s * T::kKVElems, k, n_ahead, p.seq_k);
        load_tile<T, T::kBlockN>(v_tiles + s * T::kKVElems, v, n_ahead, p.seq_k);
      } else if (T::kStages == 1) {
        load_tile<T, T::kBlockN>(k_tiles, k, (first_tile + t) * T::kBlockN, p.seq_k);
        load_tile<T, T::kBlockN>(v_tiles, v, (first_tile + t) * T::kBlockN, p.seq_k);
      }
      cp_async_commit();
      cp_async_wait<T::kStages - 1>();
    } else {
      load_tile<T, T::kBlockN>(k_tiles, k, (first_tile + t) * T::kBlockN, p.seq_k);
      load_tile<T, T::kBlockN>(v_tiles, v, (first_tile + t) * T::kBlockN, p.seq_k);
    }
    __syncthreads();

    const __half* k_tile = k_tiles + stage * T::kKVElems;
    const __half* v_tile = v_tiles + stage * T::kKVElems;
    const int n0 = (first_tile + t) * T::kBlockN;

    // ---- S = Q K^T for this warp's rows and keys.
    float s[T::kMTiles][T::kSTiles][4];
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
        ldmatrix_x4(b, k_tile + tile_offset<T>(key, col));
#pragma unroll
        for (int mt = 0; mt < T::kMTiles; ++mt) {
          mma_16816(s[mt][2 * np], q_frag[mt][ks], b[0], b[1]);
          mma_16816(s[mt][2 * np + 1], q_frag[mt][ks], b[2], b[3]);
        }
      }

    // ---- mask: only tiles that cross the sequence end or the causal diagonal pay for it.
    const bool needs_mask = n0 + T::kBlockN > p.seq_k || (T::kCausal && n0 + T::kBlockN - 1 > m0);
    if (needs_mask) {
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < T::kSTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int row = m0 + row_w + mt * 16 + (lane >> 2) + (i >= 2 ? 8 : 0);
            const int key = n0 + key_w + nt * 8 + (lane & 3) * 2 + (i & 1);
            if (key >= p.seq_k || (T::kCausal && key > row)) s[mt][nt][i] = neg_inf();
          }
    }

    // ---- online softmax, in the log2 domain with the scale folded in.
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
        const float new_max = fmaxf(row_max[mt][h], mx * scale_log2);
        // A row with every key masked so far keeps max -inf; subtract 0 to avoid inf - inf.
        const float base = new_max == neg_inf() ? 0.f : new_max;
        const float alpha = fast_exp2(row_max[mt][h] - base);
        row_max[mt][h] = new_max;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < T::kSTiles; ++nt) {
          s[mt][nt][2 * h] = fast_exp2(s[mt][nt][2 * h] * scale_log2 - base);
          s[mt][nt][2 * h + 1] = fast_exp2(s[mt][nt][2 * h + 1] * scale_log2 - base);
          sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
        }
        row_sum[mt][h] = row_sum[mt][h] * alpha + sum;
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt) {
          acc[mt][nt][2 * h] *= alpha;
          acc[mt][nt][2 * h + 1] *= alpha;
        }
      }

    // ---- O += P V: P goes from accumulator registers straight into A fragments.
#pragma unroll
    for (int kk = 0; kk < T::kPvSteps; ++kk) {
      unsigned a[T::kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        a[mt][0] = pack_half2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack_half2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack_half2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack_half2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < T::kOTiles / 2; ++dp) {
        unsigned b[4];
        const int key = key_w + kk * 16 + (lane & 15);
        const int col = dp * 16 + (lane >> 4) * 8;
        ldmatrix_x4_trans(b, v_tile + tile_offset<T>(key, col));
#pragma unroll
        for (int mt = 0; mt < T::kMTiles; ++mt) {
          mma_16816(acc[mt][2 * dp], a[mt], b[0], b[1]);
          mma_16816(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's copies overwrite this stage
  }

  // Row sums so far are per thread (its 2 of every 8 keys); complete them across the quad.
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      row_sum[mt][h] = l;
    }

  if constexpr (T::kWarpsKV == 1 && T::kSplitKV == 1) {
    // Normalise, stage the fp16 tile in shared memory, then copy out in 16-byte rows.
    __half* o_tile = reinterpret_cast<__half*>(smem_raw);
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv = row_sum[mt][h] > 0.f ? 1.f / row_sum[mt][h] : 0.f;
        const int row = row_w + mt * 16 + (lane >> 2) + 8 * h;
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt) {
          const int col = nt * 8 + (lane & 3) * 2;
          *reinterpret_cast<__half2*>(o_tile + tile_offset<T>(row, col)) =
              __floats2half2_rn(acc[mt][nt][2 * h] * inv, acc[mt][nt][2 * h + 1] * inv);
        }
      }
    __syncthreads();
    constexpr int kChunks = T::kBlockM * T::kChunksPerRow;
    constexpr int kIters = (kChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = threadIdx.x + i * T::kThreads;
      if (kChunks % T::kThreads != 0 && c >= kChunks) break;
      const int row = c / T::kChunksPerRow;
      const int col = (c % T::kChunksPerRow) * 8;
      if (m0 + row < p.seq_q)
        *reinterpret_cast<uint4*>(o + (long long)(m0 + row) * T::kHeadDim + col) =
            *reinterpret_cast<const uint4*>(o_tile + tile_offset<T>(row, col));
    }
    return;
  }

  // The general epilogue: every (row, column pair) of the block's output is emitted once with
  // its unnormalised value, running max and sum -- straight to fp16 output, or (SPLIT_KV) into
  // this block's partial buffer for the cluster merge below.
  float* partial = reinterpret_cast<float*>(smem_raw + T::kSmemMerge);
  auto emit = [&](int row, int col, float o0, float o1, float mx, float l) {
    if constexpr (T::kSplitKV == 1) {
      const float inv = l > 0.f ? 1.f / l : 0.f;
      *reinterpret_cast<__half2*>(o + (long long)(m0 + row) * T::kHeadDim + col) =
          __floats2half2_rn(o0 * inv, o1 * inv);
    } else {
      float* dst = partial + row * T::kMergeStride;
      dst[col] = o0;
      dst[col + 1] = o1;
      if (col == 0) {
        dst[T::kHeadDim] = mx;
        dst[T::kHeadDim + 1] = l;
      }
    }
  };

  if constexpr (T::kWarpsKV == 1) {
    __syncthreads();  // the partial buffer overlays Q; a split with no tiles skipped the loop's barriers
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_w + mt * 16 + (lane >> 2) + 8 * h;
        if (m0 + row >= p.seq_q) continue;
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt)
          emit(row, nt * 8 + (lane & 3) * 2, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1],
               row_max[mt][h], row_sum[mt][h]);
      }
  } else {
    // Each key group writes its unnormalised partial output, max and sum; then all threads
    // merge the groups element by element.
    float* merge = reinterpret_cast<float*>(smem_raw);
    __syncthreads();  // a split with no tiles skips the loop's barriers; Q may still be in use
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_w + mt * 16 + (lane >> 2) + 8 * h;
        float* dst = merge + (warp_kv * T::kBlockM + row) * T::kMergeStride;
#pragma unroll
        for (int nt = 0; nt < T::kOTiles; ++nt) {
          const int col = nt * 8 + (lane & 3) * 2;
          dst[col] = acc[mt][nt][2 * h];
          dst[col + 1] = acc[mt][nt][2 * h + 1];
        }
        if ((lane & 3) == 0) {
          dst[T::kHeadDim] = row_max[mt][h];
          dst[T::kHeadDim + 1] = row_sum[mt][h];
        }
      }
    __syncthreads();
    constexpr int kPairs = T::kBlockM * T::kHeadDim / 2;
    for (int e = threadIdx.x; e < kPairs; e += T::kThreads) {
      const int row = (2 * e) / T::kHeadDim;
      const int col = (2 * e) % T::kHeadDim;
      if (m0 + row >= p.seq_q) continue;
      float mx = neg_inf();
#pragma unroll
      for (int g = 0; g < T::kWarpsKV; ++g)
        mx = fmaxf(mx, merge[(g * T::kBlockM + row) * T::kMergeStride + T::kHeadDim]);
      const float base = mx == neg_inf() ? 0.f : mx;
      float l = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
      for (int g = 0; g < T::kWarpsKV; ++g) {
        const float* src = merge + (g * T::kBlockM + row) * T::kMergeStride;
        const float w = fast_exp2(src[T::kHeadDim] - base);
        l += src[T::kHeadDim + 1] * w;
        o0 += src[col] * w;
        o1 += src[col + 1] * w;
      }
      emit(row, col, o0, o1, mx, l);
    }
  }

  if constexpr (T::kSplitKV > 1) {
    // Each block of the cluster merges a slice of the rows, reading every block's partial
    // buffer through distributed shared memory; the second barrier keeps the buffers alive until
    // all blocks have read them.
    cluster_sync();
    const unsigned rank = cluster_rank();
    constexpr int kRowsPerRank = (T::kBlockM + T::kSplitKV - 1) / T::kSplitKV;
    constexpr int kPairs = kRowsPerRank * T::kHeadDim / 2;
    for (int e = threadIdx.x; e < kPairs; e += T::kThreads) {
      const int row = rank * kRowsPerRank + (2 * e) / T::kHeadDim;
      const int col = (2 * e) % T::kHeadDim;
      if (row >= T::kBlockM || m0 + row >= p.seq_q) continue;
      const float* mine = partial + row * T::kMergeStride;
      float mx = neg_inf();
      float m_z[T::kSplitKV];
#pragma unroll
      for (int z = 0; z < T::kSplitKV; ++z) {
        m_z[z] = load_peer_f32(peer_smem_addr(mine + T::kHeadDim, z));
        mx = fmaxf(mx, m_z[z]);
      }
      const float base = mx == neg_inf() ? 0.f : mx;
      float l = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
      for (int z = 0; z < T::kSplitKV; ++z) {
        const float w = fast_exp2(m_z[z] - base);
        l += w * load_peer_f32(peer_smem_addr(mine + T::kHeadDim + 1, z));
        o0 += w * load_peer_f32(peer_smem_addr(mine + col, z));
        o1 += w * load_peer_f32(peer_smem_addr(mine + col + 1, z));
      }
      const float inv = l > 0.f ? 1.f / l : 0.f;
      *reinterpret_cast<__half2*>(o + (long long)(m0 + row) * T::kHeadDim + col) =
          __floats2half2_rn(o0 * inv, o1 * inv);
    }
    cluster_sync();
  }
}

}  // namespace fa

// The grid's z dimension is SPLIT_KV, grouped into clusters of SPLIT_KV blocks on sm_90.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EVO_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define EVO_CLUSTER_DIMS(x, y, z)
#endif

template <int CAUSAL, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int CP_ASYNC,
          int SWIZZLE, int SPLIT_KV>
__global__ void __launch_bounds__(WARPS * 32) EVO_CLUSTER_DIMS(1, 1, SPLIT_KV)
    fa_s512_v3_kernel(const FaParams p) {
  fa::forward<fa::KernelTraits<CAUSAL, HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, CP_ASYNC, SWIZZLE,
                               SPLIT_KV>>(p);
}

}  // namespace evo
