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

// The constants of one block's chain, in cycles at the model's clock except where said: fitted to
// measurements (bench/fit_model_constants), so they rank variants, not predict times.
struct ChainConstants {
  double cycles_per_score_mma_sync;    // a step, per score of one warp
  double cycles_per_score_wgmma;       // the same under WGMMA (fewer instructions per score)
  double lone_warp_slowdown;           // a warp alone on its scheduler hides less latency
  double scheduler_sharing_exponent;   // more warps per scheduler lengthen a step by this power
  double cycles_per_cp_async;          // per 16-byte copy a thread issues
  double tile_barrier_cycles;          // the block-wide barrier after a tile
  double copy_latency_cycles;          // a refill, from its issue to the tile landed
  double merge_cycles_per_group;       // per extra key group, per 1024 values a warp merges
  double first_tile_cycles;            // block start to the first tile's data
  double store_cycles;                 // the output to global memory, and the exit
  double cluster_merge_cycles;         // SPLIT_KV's merge, per other block of the cluster
  // Factor on the tensor work and on each step where tiles are not swizzled (SWIZZLE = 0): the 8
  // rows one ldmatrix reads then fall in one bank group, an 8-way conflict.
  double unswizzled_slowdown;
  // Each step's fixed latency, whatever its tile's size: the scores' round trip through the tensor
  // cores, the row reductions' shuffles, the wait for the tile. Narrow tiles pay it more often.
  double step_latency_cycles;
};
// The constants the model evaluator uses (model_evaluator.cpp says what they were fitted to).
const ChainConstants& fitted_chain_constants();

KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const ProblemShape& shape, const v1::ResourceReport& resources,
                               const ChainConstants& chain = fitted_chain_constants());

}  // namespace evo
