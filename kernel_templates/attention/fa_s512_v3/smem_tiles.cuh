#pragma once
// Shared-memory tiles: the (swizzled) element layout, and a tile's rows loaded from or stored to
// global memory by cp.async, by plain stores, or as TMA boxes.
#include "kernel_traits.cuh"
#include "ptx.cuh"
#include "ptx_tma.cuh"

namespace evo {
namespace fa {

// Element offset of (row, col) in a [ROWS][HEAD_DIM] tile of 16-bit elements. With SWIZZLE the 16-byte chunk
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
__device__ __forceinline__ void tma_load_tile(Element<T>* tile, const FaParams::TensorMap& map,
                                              int row0, int bh, unsigned long long* bar) {
  for_each_tma_box<T, ROWS>([&](int row, int col) {
    tma_load_box(tile + tile_offset<T, ROWS>(row, col), map, col, row0 + row, bh, bar);
  });
}

// The reverse, by one thread: a tile out to rows [row0, row0 + ROWS) of one (batch, head); rows
// past the sequence's end are not written. Returns once the copy engine has read the tile.
template <class T, int ROWS>
__device__ __forceinline__ void tma_store_tile(const Element<T>* tile, const FaParams::TensorMap& map,
                                               int row0, int bh) {
  for_each_tma_box<T, ROWS>([&](int row, int col) {
    tma_store_box(tile + tile_offset<T, ROWS>(row, col), map, col, row0 + row, bh);
  });
  tma_store_commit_and_wait_read();
}

}  // namespace fa
}  // namespace evo
