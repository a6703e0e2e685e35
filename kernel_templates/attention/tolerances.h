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
// e4m3: the reference reads the values the FP8 bytes stand for (byte times scale), so again what
// the gate sees is the kernel's own rounding, and one dominates: P rounded to e4m3 before P*V, 3
// stored mantissa bits, within 2^-4 of each probability (the bf16 output adds 2^-9). An output
// element is a weighted mean of V's values with weights off by at most 2^-4 of themselves, so it
// is off by at most 2^-4 of the largest |V| (the checks draw |V| <= 2), and the relative L2 error,
// the weights' errors averaging over the keys, by at most 2^-4. Probabilities below e4m3's normal
// range (2^-6) round in absolute steps of 2^-10 instead; they weigh a row least. Derived from the
// format, as bf16's; a wrong tile or a wrong head's scale (the checks draw the heads' amplitudes
// x0.5 to x2) errs by tens of percent.
inline constexpr double kE4m3PRounding = 0.0625;  // 2^-4
inline constexpr double kE4m3LargestV = 2.0;
inline constexpr Tolerance kE4m3Tolerance{kE4m3PRounding, kE4m3PRounding * kE4m3LargestV};
inline constexpr Tolerance tolerance_for(DType d) {
  switch (d) {
    case DType::kBF16:
      return kBf16Tolerance;
    case DType::kE4M3:
      return kE4m3Tolerance;
    case DType::kF16:
      break;
  }
  return kFp16Tolerance;
}

}  // namespace evo::attention
