#include "model_estimate.h"

#include <algorithm>
#include <cmath>

#include "attention/problem.h"

namespace evo::attention {
namespace {

// Fitted by bench/fit_model_constants to an NVIDIA H200's measurements of 285 genomes: the
// suites' (tests/unit/worker/data/h200_measured_fitness.csv) and two random samples
// (h200_random_genomes*.csv). Checked on random samples the fit never saw: h200_held_out_*.csv,
// measured before the last fit (but looked at while the step latency term was added), and
// h200_held_out_2_*.csv, measured after it. model_calibration_test checks the order and the
// pick they give on all of them.
constexpr ChainConstants kH200Fit = {
    /*cycles_per_score_mma_sync=*/1.073,
    /*cycles_per_score_wgmma=*/0.7273,
    /*lone_warp_slowdown=*/1.15,
    /*scheduler_sharing_exponent=*/0.9,
    /*cycles_per_cp_async=*/20.77,
    /*tile_barrier_cycles=*/84.13,
    /*copy_latency_cycles=*/2730,
    /*merge_cycles_per_group=*/347.4,
    /*first_tile_cycles=*/4095,
    /*store_cycles=*/1110,
    /*cluster_merge_cycles=*/3262,
    /*unswizzled_slowdown=*/10.8,
    /*step_latency_cycles=*/550.4,
};

}  // namespace

const ChainConstants& fitted_chain_constants() { return kH200Fit; }

double model_wave_seconds(const ModelInput& in) { return wave_seconds(in, kH200Fit); }

double packed_work_fraction(const Shape& shape) {
  if (!shape.varlen()) return 1.0;
  Shape longest = shape;  // the dense batch of its longest lengths, which the grid covers
  longest.lens_q.clear();
  longest.lens_k.clear();
  return shape.flops() / longest.flops();
}

double wave_seconds(const ModelInput& in, const ChainConstants& chain) {
  const DeviceModel& dev = in.device;
  const Shape shape = shape_of(in.problem);
  const auto& vars = in.variables;
  const int concurrent = in.concurrent;
  const double block_m = static_cast<double>(vars.at("BLOCK_M"));
  const double block_n = static_cast<double>(vars.at("BLOCK_N"));
  const int warps = static_cast<int>(vars.at("WARPS"));
  const int warps_kv = vars.count("WARPS_KV") ? static_cast<int>(vars.at("WARPS_KV")) : 1;
  // Copies run under the math with two or more stages (cp.async or TMA), and with TMA's one stage,
  // whose K and V are refilled apart, each as soon as its GEMM is done (bench/NOTES.md, 2026-11-26:
  // TMA with one stage, K and V refilled apart). TMA, STAGE_RELEASE, PRODUCER and CP_ASYNC are
  // what the genome's SCHEDULE does (derived values of the space).
  const bool tma = vars.count("TMA") && vars.at("TMA") == 1;
  // The producer warpgroup's stages free themselves as STAGE_RELEASE's do: no barrier per tile.
  const bool stage_release = (vars.count("STAGE_RELEASE") && vars.at("STAGE_RELEASE") == 1) ||
                             (vars.count("PRODUCER") && vars.at("PRODUCER") == 1);
  const int64_t stages = vars.at("STAGES");
  const bool one_stage_split_refill = tma && stages == 1 && !stage_release;
  const bool pipelined = (stages >= 2 && (vars.at("CP_ASYNC") == 1 || tma)) || one_stage_split_refill;
  // SPLIT_KV blocks share one row tile's keys (grid_z) and merge fp32 partials: a cluster's by
  // storing them into each other's shared memory, behind a cluster barrier; a larger split's
  // through the workspace, which the last block reads back (its bytes below). Both are charged
  // the cluster's merge cycles per other block: the workspace's merge has no constants of its own
  // fitted yet.
  const double split = vars.count("SPLIT_KV") ? static_cast<double>(vars.at("SPLIT_KV")) : 1.0;
  const double d = shape.head_dim;

  // Work of one block. Causal blocks see on average half of the queries' square (plus the
  // diagonal tile) past the keys before it (the bottom-right shift).
  const double keys =
      shape.causal ? std::min<double>(shape.seq_k, shape.causal_shift() + (shape.seq_q + block_m) / 2.0)
                   : shape.seq_k;
  const double kv_tiles = std::ceil(keys / split / block_n);
  const double padded_keys = kv_tiles * block_n;                 // tails are computed, then masked
  const double mma_flops = 4.0 * block_m * padded_keys * d;      // Q*K^T and P*V
  const double softmax_flops = 8.0 * block_m * padded_keys;      // scale, max, exp, sum, rescale
  // Q,O once; K,V per block; two bytes an element, fp16 and bf16 alike (the tensor cores run both
  // at one rate), one for e4m3's inputs, whose tensor cores run at twice that rate.
  const double in_bytes = input_bytes(shape.dtype);
  const double fp8_speedup = shape.dtype == DType::kE4M3 ? 2.0 : 1.0;
  double bytes = (in_bytes + 2.0) * block_m * d + 2.0 * in_bytes * padded_keys * d;
  if (split > 1) bytes += 4.0 * block_m * (d + 2);  // fp32 partial sent to the split's other blocks
  if (vars.count("SPLIT_IN_MEMORY") && vars.at("SPLIT_IN_MEMORY") == 1)
    bytes += 4.0 * block_m * (d + 8);  // ... and the last block's read of each one back

  // Per-SM rates. The tensor pipes of an SM's four sub-partitions need about two warps each
  // issuing to hide mma latency; fewer resident warps leave them idle.
  const double clock_hz = dev.sm_clock_mhz * 1e6;
  const int resident_warps = concurrent * warps;
  const double issue_efficiency = std::min(1.0, resident_warps / 8.0);
  // WGMMA genomes issue warpgroup MMAs, which reach the tensor cores' full rate on sm_90a.
  const bool wgmma = vars.count("WGMMA") && vars.at("WGMMA") == 1 && dev.wgmma_tflops > 0;
  const double sm_mma = (wgmma ? dev.wgmma_tflops : dev.mma_sync_tflops) * 1e12 / dev.sm_count *
                        issue_efficiency * fp8_speedup;
  const double sm_fp32 = dev.fp32_tflops * 1e12 / dev.sm_count;
  // K/V tiles of one head are re-read by each of its blocks: mostly L2 hits.
  const double sm_bw = dev.l2_gbps * 1e9 / dev.sm_count;

  const double conflicts =
      vars.count("SWIZZLE") && vars.at("SWIZZLE") == 0 ? chain.unswizzled_slowdown : 1.0;
  const double t_compute = concurrent * (conflicts * mma_flops / sm_mma + softmax_flops / sm_fp32);
  const double t_memory = concurrent * bytes / sm_bw;
  // cp.async with two or more stages overlaps the next tile's copy with this tile's math; without
  // it the copy stalls the block, partly hidden by other resident blocks.
  const double exposed = pipelined ? 0.1 : (concurrent > 1 ? 0.5 : 1.0);
  const double t_overlap = std::max(t_compute, t_memory) + exposed * std::min(t_compute, t_memory);
  // One block's own chain of dependent work, which sets the time where an SM holds few blocks
  // (the small shapes, bench/NOTES.md "Where the gap is"): the first tile's arrival, one step per
  // K/V tile paced by each warp's scores and slowed by the warps sharing its scheduler, the
  // copies a pipeline too shallow for the sequence leaves exposed, the key groups' merge, the
  // cluster merge and the store. A causal wave of one block per SM lasts as long as its longest
  // block, which reads every key.
  const double chain_tiles =
      shape.causal && in.waves == 1 ? std::ceil(shape.seq_k / split / block_n) : kv_tiles;
  const double rows_per_warp = block_m / static_cast<double>(vars.at("WARPS_M"));
  const double scores_per_warp = rows_per_warp * block_n / warps_kv;
  const double warps_per_scheduler = resident_warps / 4.0;
  const double per_score = wgmma ? chain.cycles_per_score_wgmma : chain.cycles_per_score_mma_sync;
  double step = conflicts * per_score * scores_per_warp *
                std::pow(std::max(chain.lone_warp_slowdown, warps_per_scheduler),
                         chain.scheduler_sharing_exponent);
  if (!tma) step += chain.cycles_per_cp_async * (2.0 * block_n * d * 2 / 16) / (warps * 32);
  step += chain.step_latency_cycles;
  if (!stage_release) step += chain.tile_barrier_cycles;
  // TMA's one stage refills K and V apart: half a stage more in flight.
  const double depth = stages > 1 ? static_cast<double>(stages) : one_stage_split_refill ? 1.5 : 1.0;
  const double refills = std::max(0.0, chain_tiles - depth);
  // A refill is issued when its stage frees; the stages ahead of it hide that many steps of it.
  const double exposed_per_refill = std::max(0.0, chain.copy_latency_cycles - (depth - 1) * step);
  const double merge =
      warps_kv > 1 ? chain.merge_cycles_per_group * (warps_kv - 1) * rows_per_warp * d / 1024 : 0.0;
  const double chain_cycles = chain.first_tile_cycles + chain_tiles * step +
                              refills * exposed_per_refill + merge +
                              chain.cluster_merge_cycles * (split - 1) + chain.store_cycles;

  // A packed batch's grid covers its longest sequence for every sequence, and the blocks past a
  // shorter one's end leave at once: its waves hold the work of its own lengths.
  return std::max(chain_cycles / clock_hz, t_overlap) * packed_work_fraction(shape);
}

}  // namespace evo::attention
