#pragma once
// The `model` evaluator: real NVRTC compile and gates 1-3, then an analytical time estimate per
// shape: the occupancy from the real registers and shared memory, the grid's waves over the SMs
// and the launch overhead here, and how long one wave lasts from the kernel's family
// (KernelFamily::model_wave_seconds; attention's, kernel_templates/attention/model_estimate.cpp,
// prices tile FLOPs, tile bytes and one block's chain of steps with constants fitted to an H200).
// Results are marked estimated and carry device_class "<arch>/model/estimated", so they never
// mix with measured ones.
#include <functional>
#include <memory>

#include "device_catalog.h"
#include "evaluator.h"
#include "evo/evo.pb.h"
#include "family_model.h"
#include "genome.h"
#include "search_space.h"
#include "problem.h"

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

// The family's part (how long one wave of its blocks lasts) is its KernelFamily::model_wave_seconds
// (kernel_templates/family_model.h). Throws InputError for a genome of an unknown template.
KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const Problem& problem, const v1::ResourceReport& resources);
// The same with another wave model, e.g. a family's under constants being fitted
// (bench/fit_model_constants).
KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const Problem& problem, const v1::ResourceReport& resources,
                               const std::function<double(const ModelInput&)>& wave_seconds);

}  // namespace evo
