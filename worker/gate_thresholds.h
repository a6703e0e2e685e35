#pragma once
// Every threshold the gates apply, in one place. Change a number here, not at its use.
#include <cstdint>

namespace evo::gates {

// Gate 2, resources: the timed build itself must not spill or keep arrays in local memory.
inline constexpr int kMaxSpillBytes = 0;
inline constexpr int kMaxStackFrameBytes = 0;

// Gate 4, correctness against the family's float32 reference: the tolerances are each family's
// (FamilyRuntime::tolerance; attention's in kernel_templates/attention/tolerances.h).
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
// the base budget plus an allowance per element of its problems' tensors
// (FamilyRuntime::elements: for attention Q, K, V and O).
inline constexpr int kDefaultWatchdogMs = 10000;
inline constexpr double kWatchdogNsPerElement = 100.0;
inline constexpr int kSanitizerWatchdogMs = 300000;

// Elite admission: a second, independent measurement must agree within this fraction.
inline constexpr double kConfirmationTolerance = 0.10;

}  // namespace evo::gates
