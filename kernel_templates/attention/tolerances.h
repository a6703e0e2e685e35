#pragma once
// The attention family's correctness tolerances, per element type of Q, K, V and O: what the
// correctness gate allows between a kernel's output and the float32 reference (reference.cuh).
#include "../tolerance.h"
#include "dtype.h"

namespace evo::attention {

inline constexpr Tolerance kFp16Tolerance{2e-3, 2e-2};
// The reference reads the same rounded inputs as the kernel, so what the gate sees is the
// kernel's own roundings to the element type (P before the P*V product, the output) beside
// float32 sums. Each is within half a unit in the last place: 2^-11 relative for fp16, whose
// significand has 11 bits, and 2^-8 for bf16's 8 bits, 2^3 = 8 times coarser. So bf16's bounds
// are fp16's times 8: derived from the formats, not measured.
inline constexpr double kBf16RoundingOverFp16 = 8.0;
inline constexpr Tolerance kBf16Tolerance{kFp16Tolerance.max_rel_l2_error * kBf16RoundingOverFp16,
                                          kFp16Tolerance.max_abs_error * kBf16RoundingOverFp16};
inline constexpr Tolerance tolerance_for(DType d) {
  return d == DType::kBF16 ? kBf16Tolerance : kFp16Tolerance;
}

}  // namespace evo::attention
