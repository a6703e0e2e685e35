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
};

}  // namespace evo

#endif  // EVO_ATTENTION_DTYPE_H
