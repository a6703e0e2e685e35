#pragma once
// Every threshold the gates apply, in one place. Change a number here, not at its use.
#include <cstdint>

#include "attention/dtype.h"

namespace evo::gates {

// Gate 2, resources: the timed build itself must not spill or keep arrays in local memory.
inline constexpr int kMaxSpillBytes = 0;
inline constexpr int kMaxStackFrameBytes = 0;

// Gate 4, correctness against the float32 reference, per element type of the inputs and output.
struct Tolerance {
  double max_rel_l2_error;  // ||out - ref|| / ||ref||
  double max_abs_error;     // the largest |out - ref| of one element
};
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
inline constexpr int kRepeatedLaunches = 64;    // back-to-back launches before the re-check

// Gate 5, timing with CUDA events. Each sample replays a graph of kLaunchesPerTimingSample (or
// more: one per input set) back-to-back launches between two events, as a model's graph calls the
// kernel: each call's start then overlaps the previous call's tail (programmatic launch), which
// events around every single launch would forbid, and the host's launch cost stays out. A
// sample's time is its per-call mean; the fitness is the samples' median.
inline constexpr int kWarmupLaunches = 20;
inline constexpr int kTimedLaunches = 200;
inline constexpr int kLaunchesPerTimingSample = 20;
inline constexpr int64_t kRotationBytes = 256ll << 20;  // input sets cycled so L2 cannot flatter
// The replays above cost a fast kernel milliseconds, but a correct and slow one (a naive kernel,
// a bad genome at a big shape) could spend the watchdog's whole budget there and be reported as
// a hang. Where the warm-up says the plan, run twice (inputs rotated, then one resident set),
// would take longer than this, the graph shrinks towards kLaunchesPerTimingSample launches and
// the samples towards kMinTimingSamples.
inline constexpr double kTimingBudgetMs = 1500.0;
inline constexpr int kMinTimingSamples = 3;

// Process isolation. The watchdog catches hangs; honest work grows with the tensors (inputs drawn
// and uploaded, outputs compared on the host, a few hundred launches; small tensors get more
// launches, one per rotated input set in the timing graph, each as short), so each evaluation gets
// the base budget plus an allowance per element of Q, K, V and O over all its shapes.
inline constexpr int kDefaultWatchdogMs = 10000;
inline constexpr double kWatchdogNsPerElement = 100.0;
inline constexpr int kSanitizerWatchdogMs = 300000;

// Elite admission: a second, independent measurement must agree within this fraction.
inline constexpr double kConfirmationTolerance = 0.10;

}  // namespace evo::gates
