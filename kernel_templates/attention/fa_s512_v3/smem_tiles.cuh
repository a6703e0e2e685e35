#pragma once
// Shared-memory tiles: the (swizzled) element layout, and a tile's rows loaded from or stored to
// global memory by cp.async, by plain stores, or as TMA boxes.
#include "kernel_traits.cuh"
#include "ptx.cuh"
#include "ptx_tma.cuh"

namespace evo {
namespace fa {

// Unit offset of (row, col) in a [ROWS][HEAD_DIM] tile of 16-bit units. With SWIZZLE the 16-byte chunk
// index is XORed with the row, so the 8 rows one ldmatrix reads fall in 8 different bank groups.
// WGMMA and TMA tiles are what wgmma's descriptors and the tensor maps call 128-byte-swizzled:
// 64-column panels ([ROWS][64] each, one after the other) whose 8 chunks per row are XORed with
// the row's low 3 bits; or (PANEL 32, e4m3's 64-byte rows) 64-byte-swizzled: 32-column panels
// whose 4 chunks per row are XORed with bits 1-2 of the row.
template <class T, int ROWS, int PANEL = 64>
__device__ __forceinline__ int tile_offset(int row, int col) {
  static_assert(PANEL == 64 || PANEL == 32, "128- or 64-byte swizzle");
  if constexpr (T::kPanels && PANEL == 32) {
    const int chunk = ((col >> 3) & 3) ^ ((row >> 1) & 3);
    return (col >> 5) * ROWS * 32 + row * 32 + (chunk << 3) + (col & 7);
  } else if constexpr (T::kPanels) {
    const int chunk = ((col >> 3) & 7) ^ (row & 7);
    return (col >> 6) * ROWS * 64 + row * 64 + (chunk << 3) + (col & 7);
  } else if constexpr (T::kSwizzle) {
    const int chunk = (col >> 3) ^ (row & 7);
    return row * T::kHeadDim + (chunk << 3) + (col & 7);
  } else {
    return row * T::kHeadDim + col;
  }
}

// Copies rows [row0, row0 + ROWS) of a [seq][HEAD_DIM] matrix (rows `stride` elements apart:
// HEAD_DIM, or a packed batch's heads * HEAD_DIM) into a tile; rows at or past `seq` become zeros. Every thread of the block takes part; kAsync: by cp.async (the caller
// commits and waits), else through registers.
template <class T, int ROWS, bool kAsync = T::kCpAsync>
__device__ __forceinline__ void load_tile(Element<T>* tile, const Element<T>* src, int row0, int seq,
                                          int stride = T::kHeadDim) {
  constexpr int kChunks = ROWS * T::kChunksPerRow;
  constexpr int kIters = (kChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = threadIdx.x + i * T::kThreads;
    if (kChunks % T::kThreads != 0 && c >= kChunks) break;
    const int row = c / T::kChunksPerRow;
    const int col = (c % T::kChunksPerRow) * 8;
    const bool valid = row0 + row < seq;
    const Element<T>* g = src + (long long)(valid ? row0 + row : 0) * stride + col;
    Element<T>* s = tile + tile_offset<T, ROWS>(row, col);
    if constexpr (kAsync) {
      cp_async_16(s, g, valid);
    } else {
      uint4 x = valid ? *reinterpret_cast<const uint4*>(g) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(s) = x;
    }
  }
}

// The TMA boxes of a [ROWS][COLS] tile of PANEL-unit panels, in the order they are issued:
// f(row, col) with each box's first row and column (units) within the tile.
template <class T, int ROWS, int COLS, int PANEL, class F>
__device__ __forceinline__ void for_each_tma_box(F&& f) {
#pragma unroll
  for (int col = 0; col < COLS; col += PANEL)
#pragma unroll
    for (int row = 0; row < ROWS; row += T::template kTmaBoxRowsOf<ROWS>) f(row, col);
}

// TMA: the same rows of Q or K as load_tile, as boxes issued by one thread; rows past the
// sequence's end arrive as zeros (the tensor map's bounds are per (batch, head)). Completes on
// `bar`, which the caller has told to expect the tile's bytes.
template <class T, int ROWS>
__device__ __forceinline__ void tma_load_tile(Element<T>* tile, const FaParams::TensorMap& map,
                                              int row0, int bh, unsigned long long* bar) {
  for_each_tma_box<T, ROWS, T::kQkCols, T::kQkPanel>([&](int row, int col) {
    tma_load_box(tile + tile_offset<T, ROWS, T::kQkPanel>(row, col), map, col * T::kMapColsPerUnit,
                 row0 + row, bh, bar);
  });
}

// e4m3: keys [key0, key0 + BLOCK_N) of V^T ([head_dim][keys] of one (batch, K/V head)) into a
// [HEAD_DIM][BLOCK_N / 2] tile of 32-unit panels, one box of 64 keys by every row per panel; keys
// past the sequence's end arrive as zeros.
template <class T>
__device__ __forceinline__ void tma_load_vt_tile(Element<T>* tile, const FaParams::TensorMap& map,
                                                 int key0, int bh_kv, unsigned long long* bar) {
#pragma unroll
  for (int col = 0; col < T::kBlockN / 2; col += T::kVtPanel)
    tma_load_box(tile + tile_offset<T, T::kHeadDim, T::kVtPanel>(0, col), map, key0 + 2 * col, 0, bh_kv, bar);
}

// The reverse for O (16-bit, 64-column panels), by one thread: a tile out to rows
// [row0, row0 + ROWS) of one (batch, head); rows past the sequence's end are not written.
// Returns once the copy engine has read the tile.
template <class T, int ROWS>
__device__ __forceinline__ void tma_store_tile(const OutElement<T>* tile, const FaParams::TensorMap& map,
                                               int row0, int bh) {
  for_each_tma_box<T, ROWS, T::kHeadDim, 64>([&](int row, int col) {
    tma_store_box(tile + tile_offset<T, ROWS>(row, col), map, col, row0 + row, bh);
  });
  tma_store_commit_and_wait_read();
}

}  // namespace fa
}  // namespace evo
