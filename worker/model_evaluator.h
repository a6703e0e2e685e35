#pragma once
// The `model` evaluator: real NVRTC compile and gates 1-3, then an analytical time estimate per
// shape from the real registers and shared memory (occupancy), the grid (waves over the SMs),
// tile FLOPs at the tensor rate and tile bytes at memory bandwidth, or, where that is longer, one
// block's own chain of steps (the small shapes), plus launch overhead. The chain's constants are
// fitted to an H200's measurements, and a test checks the order they give against them.
// Results are marked estimated and carry device_class "<arch>/model/estimated", so they never
// mix with measured ones.
#include <memory>

#include "device_catalog.h"
#include "evaluator.h"
#include "evo/evo.pb.h"
#include "genome.h"
#include "search_space.h"
#include "shape.h"

namespace evo {

// Throws InputError for an arch without a device model, std::runtime_error when NVRTC cannot be
// set up (CUDA headers missing, cache directory unusable).
std::unique_ptr<Evaluator> make_model_evaluator(const EvaluatorOptions& options);

// The estimate for one compiled, launchable kernel; exposed for tests. registers and static
// shared memory come from ptxas, the launch from the search space.
struct KernelEstimate {
  int blocks_per_sm = 0;     // resident blocks per SM (occupancy)
  int64_t waves = 0;         // ceil(grid blocks / (blocks_per_sm * SMs))
  double us = 0;             // estimated kernel time
};
KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const ProblemShape& shape, const v1::ResourceReport& resources);

}  // namespace evo
