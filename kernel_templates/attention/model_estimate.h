#pragma once
// The attention family's part of the model evaluator's estimate: how long one wave of its blocks
// lasts, from the tile FLOPs at the tensor rate, the tile bytes at L2 bandwidth and, where that is
// longer, one block's own chain of steps (the small shapes). worker/model_evaluator.cpp keeps the
// part every family shares (compile, gates, occupancy, waves, launch overhead) and calls this
// through the family (KernelFamily::model_wave_seconds).
#include "family_model.h"

namespace evo::attention {

struct Shape;  // problem.h

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
// The constants the estimate uses (model_estimate.cpp says what they were fitted to).
const ChainConstants& fitted_chain_constants();

// A packed batch's work over that of the dense batch of its longest lengths (its FLOPs' ratio), by
// which a wave of its grid is shorter; 1 for a dense batch.
double packed_work_fraction(const Shape& shape);

// Seconds one wave lasts under the given constants (bench/fit_model_constants tries others).
double wave_seconds(const ModelInput& in, const ChainConstants& chain);
// The same under fitted_chain_constants(): the family's KernelFamily::model_wave_seconds.
double model_wave_seconds(const ModelInput& in);

}  // namespace evo::attention
