#pragma once
// Host side of fa_s512_v3's TMA gene: the tensor maps through which the copy engine reads Q, K and
// V, and (wgmma blocks) writes O. Each is a 3-d view [batch * heads][seq][head_dim] of a
// contiguous fp16 or bf16 tensor (two bytes an element), e4m3 one (a byte; its V is V^T,
// [batch * heads_kv][head_dim][seq_k], fp8.h) or, for a packed batch ([tokens, heads,
// head_dim]), [heads][tokens][head_dim] of the same memory; it is moved in boxes 128 bytes wide
// (the width of the 128-byte swizzle the wgmma tiles use; 64 bytes with the 64-byte swizzle
// where e4m3 rows are 64 bytes, and in V^T's boxes of 64 keys) by some rows of one slice; rows
// past the slice's end arrive as zeros, and are not written (a packed batch's
// rows past a sequence's end are the next sequence's, which the kernel masks and never stores
// through the map). K and V boxes may be taller than Q and O ones. The
// kernel's traits (kTmaBoxCols, kTmaBoxRowsOf: its TMA_BOX_ROWS gene against each tile's rows)
// name the same boxes, and the space's launch formulas "tensor_map_box_rows" (K, V) and
// "tensor_map_q_box_rows" (Q, O) tell the host the rows.
//
// The encoder is looked up in the driver at run time, so nothing that includes this links the
// driver library; a host without a driver gets the runtime's error, not a failed load.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "dtype.h"
#include "fp8.h"

namespace evo {

// The box heights a kernel may ask for: the copy engine takes up to 256 rows, and the kernel's
// tiles are whole boxes of 32 or 64 rows, or one box of the whole tile (128, 192 or 256 rows;
// e4m3's V^T: head_dim rows). KernelPlan.TheSpaceAndTheKernelAgree* holds every genome's boxes
// against this.
inline constexpr bool valid_tensor_map_box_rows(int box_rows) {
  return box_rows == 32 || box_rows == 64 || box_rows == 128 || box_rows == 192 || box_rows == 256;
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The copy engine's name for an element type; false for one it has no name for here.
inline bool tensor_map_data_type(DType dtype, CUtensorMapDataType& out) {
  switch (dtype) {
    case DType::kF16:
      out = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      return true;
    case DType::kBF16:
      out = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
      return true;
    case DType::kE4M3:  // bytes: the copy engine only moves them
      out = CU_TENSOR_MAP_DATA_TYPE_UINT8;
      return true;
  }
  return false;
}

// The view a map reads: `slices` of `rows` rows of head_dim elements (V^T's: seq_k keys),
// consecutive rows row_stride elements apart and consecutive slices slice_stride apart.
struct TensorMapView {
  int slices = 0, rows = 0, head_dim = 0;
  long long row_stride = 0, slice_stride = 0;
  friend bool operator==(const TensorMapView& a, const TensorMapView& b) {
    return a.slices == b.slices && a.rows == b.rows && a.head_dim == b.head_dim && a.row_stride == b.row_stride &&
           a.slice_stride == b.slice_stride;
  }
};

// [slices][rows][head_dim], contiguous: a dense batch's (batch, head) slices.
inline TensorMapView dense_view(int slices, int rows, int head_dim) {
  return {slices, rows, head_dim, head_dim, static_cast<long long>(rows) * head_dim};
}
// [tokens][heads][head_dim] read as one slice per head.
inline TensorMapView packed_view(int heads, int tokens, int head_dim) {
  return {heads, tokens, head_dim, static_cast<long long>(heads) * head_dim, head_dim};
}
// e4m3's V^T: [slices][head_dim][pitch] bytes, pitch = e4m3_vt_pitch(seq_k), read whole (a key's
// column may lie past seq_k within its 16: fp8.h, e4m3_vt_column).
inline TensorMapView transposed_view(int slices, int seq_k, int head_dim) {
  const long long pitch = e4m3_vt_pitch(seq_k);
  return {slices, head_dim, static_cast<int>(pitch), pitch, pitch * head_dim};
}

// The bytes of a box's row, each with the swizzle of its width: kRowBoxBytes, 128 (the 128-byte
// swizzle's width) or a row's bytes where it has fewer (e4m3 at head dim 64); 64 for V^T, a box of
// 64 keys whatever seq_k is.
inline constexpr int kRowBoxBytes = 0;
inline constexpr int kVtBoxRowBytes = 64;

// One map over `base` (the view, of dtype) into `out` (128 bytes, 64-aligned), in boxes of
// box_rows rows by box_row_bytes. Returns cudaSuccess, or cudaErrorInvalidValue for a box the
// kernels never use, an unknown dtype or a view the driver refuses.
inline cudaError_t encode_attention_tensor_map(void* out, const void* base, DType dtype, const TensorMapView& view,
                                               int box_rows, int box_row_bytes = kRowBoxBytes) {
  CUtensorMapDataType data_type{};
  if (!valid_tensor_map_box_rows(box_rows) || !tensor_map_data_type(dtype, data_type))
    return cudaErrorInvalidValue;
  const int bytes = input_bytes(dtype);
  const long long row_bytes = static_cast<long long>(view.head_dim) * bytes;
  const int box_bytes = box_row_bytes != kRowBoxBytes ? box_row_bytes : row_bytes < 128 ? static_cast<int>(row_bytes) : 128;
  if (box_bytes != 128 && box_bytes != 64) return cudaErrorInvalidValue;
  static EncodeTiledFn encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<EncodeTiledFn>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(view.head_dim), static_cast<cuuint64_t>(view.rows),
                              static_cast<cuuint64_t>(view.slices)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(view.row_stride) * bytes,
                                 static_cast<cuuint64_t>(view.slice_stride) * bytes};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_bytes / bytes), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = encode(static_cast<CUtensorMap*>(out), data_type, 3,
                            const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            box_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The last map a thread encoded for one of q, k, v: a model calls attention on the same buffers
// step after step, and the entry point then copies 128 bytes instead of asking the driver again.
struct RememberedTensorMap {
  const void* base = nullptr;
  DType dtype = DType::kF16;
  TensorMapView view;
  int box_rows = 0, box_row_bytes = 0;
  CUtensorMap map;
};

inline cudaError_t encode_remembered(RememberedTensorMap& last, void* out, const void* base, DType dtype,
                                     const TensorMapView& view, int box_rows, int box_row_bytes = kRowBoxBytes) {
  if (last.base != base || last.dtype != dtype || !(last.view == view) || last.box_rows != box_rows ||
      last.box_row_bytes != box_row_bytes) {
    const cudaError_t e = encode_attention_tensor_map(&last.map, base, dtype, view, box_rows, box_row_bytes);
    if (e != cudaSuccess) {
      last.base = nullptr;
      return e;
    }
    last.base = base;
    last.dtype = dtype;
    last.view = view;
    last.box_rows = box_rows;
    last.box_row_bytes = box_row_bytes;
  }
  *static_cast<CUtensorMap*>(out) = last.map;
  return cudaSuccess;
}

// Fills the q_map, k_map, v_map and o_map of an FaParams-like struct from its q, k, v, o and
// shape, tensors of `dtype` (O of output_dtype(dtype)): K and V in boxes of kv_box_rows rows, Q
// and O in boxes of q_box_rows (the launch formulas' values); e4m3's V^T in boxes of 64 keys by
// head_dim rows. A packed batch (cu_seqlens_q set) is read as one slice per head over its
// total_q / total_k tokens.
template <class Params>
cudaError_t encode_attention_tensor_maps(Params& p, DType dtype, int head_dim, int kv_box_rows,
                                         int q_box_rows) {
  static_assert(sizeof(p.q_map) == sizeof(CUtensorMap), "a tensor map is 128 opaque bytes");
  static thread_local RememberedTensorMap last[4];
  const int heads_kv = p.heads_kv > 0 ? p.heads_kv : p.heads;
  const bool packed = p.cu_seqlens_q != nullptr;
  const TensorMapView qo = packed ? packed_view(p.heads, p.total_q, head_dim)
                                  : dense_view(p.batch * p.heads, p.seq_q, head_dim);
  const TensorMapView kv = packed ? packed_view(heads_kv, p.total_k, head_dim)
                                  : dense_view(p.batch * heads_kv, p.seq_k, head_dim);
  cudaError_t e = encode_remembered(last[0], &p.q_map, p.q, dtype, qo, q_box_rows);
  if (e == cudaSuccess) e = encode_remembered(last[1], &p.k_map, p.k, dtype, kv, kv_box_rows);
  if (e == cudaSuccess) {
    if (dtype == DType::kE4M3) {
      if (packed) return cudaErrorInvalidValue;  // V^T has no packed layout
      e = encode_remembered(last[2], &p.v_map, p.v, dtype, transposed_view(p.batch * heads_kv, p.seq_k, head_dim),
                            head_dim, kVtBoxRowBytes);
    } else {
      e = encode_remembered(last[2], &p.v_map, p.v, dtype, kv, kv_box_rows);
    }
  }
  if (e == cudaSuccess) e = encode_remembered(last[3], &p.o_map, p.o, output_dtype(dtype), qo, q_box_rows);
  return e;
}

}  // namespace evo
