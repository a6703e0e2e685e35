#pragma once
// The element types of the attention family's Q, K, V and O: the DTYPE template argument of its
// kernels and the problem variable DTYPE of its search spaces. Plain C++ (host and device).

namespace evo {

enum class DType : int {
  kF16 = 0,   // IEEE half: 10 stored mantissa bits
  kBF16 = 1,  // bfloat16: 7 stored mantissa bits, float's exponent range
};

}  // namespace evo
