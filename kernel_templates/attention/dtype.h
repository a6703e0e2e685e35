// The element types of the attention family's Q, K, V and O: the DTYPE template argument of its
// kernels and the problem variable DTYPE of its search spaces. Plain C++ (host and device).
// An include guard, not a once-pragma: an exported file holds both the kernel's text and its host
// support (attention_tensor_maps.h), and each inlines this file.
#ifndef EVO_ATTENTION_DTYPE_H
#define EVO_ATTENTION_DTYPE_H

namespace evo {

enum class DType : int {
  kF16 = 0,   // IEEE half: 10 stored mantissa bits
  kBF16 = 1,  // bfloat16: 7 stored mantissa bits, float's exponent range
  // FP8 e4m3 Q, K and V (3 stored mantissa bits, largest finite 448, no infinities), each
  // (batch, head) with a float scale beside it (value = element * scale; quantize_fp8.h); V
  // transposed, [batch, heads_kv, head_dim, seq_k] with rows padded to 16 bytes and each 16 keys
  // in the order of P's fragment (fp8.h: e4m3_vt_column), as the second GEMM reads it; O in bf16.
  kE4M3 = 2,
};

// Bytes of one element of Q, K and V; O's type. (Host and device: the kernel text inlines this.)
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EVO_DTYPE_HD __host__ __device__
#else
#define EVO_DTYPE_HD
#endif
EVO_DTYPE_HD constexpr int input_bytes(DType d) { return d == DType::kE4M3 ? 1 : 2; }
EVO_DTYPE_HD constexpr DType output_dtype(DType d) { return d == DType::kE4M3 ? DType::kBF16 : d; }
#undef EVO_DTYPE_HD

}  // namespace evo

#endif  // EVO_ATTENTION_DTYPE_H
