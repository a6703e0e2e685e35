#pragma once
// Gates 4 (correct) and 5 (timed) for one shape, on the current CUDA device, through the shape's
// family runtime (family_runtime.h: its inputs, parameter block, reference and tolerance). Run
// only inside the evaluation child: a candidate's fault must never reach the parent's process.
// CUDA errors are thrown as CudaFailure.
#include <cstdint>
#include <optional>
#include <string>

#include "eval_request.h"
#include "gate_math.h"
#include "loaded_kernel.h"

namespace evo::cuda {

struct CorrectnessResult {
  ErrorFigures worst;                   // over all checks of the shape
  std::optional<std::string> failure;   // one line, or nullopt when it passed
};

// Fresh random inputs (seeded per check), NaN-poisoned output, reference comparison; the same on
// each of the family's hard inputs; then `repeated_launches` back-to-back launches and a re-check
// on fresh inputs. `reference` is the family's reference kernel for the shape.
CorrectnessResult check_correctness(const LoadedKernel& candidate, const LoadedKernel& reference,
                                    const ShapeJob& job, uint64_t seed, int repeated_launches);

// Warm-up, then `timed / per_sample` samples, each one replay between two CUDA events of a graph
// of back-to-back launches (at least `per_sample`, and one per input set); a sample's time is its
// per-call mean. Inputs cycled over enough sets to defeat L2.
TimingSummary time_shape(const LoadedKernel& candidate, const ShapeJob& job, uint64_t seed,
                         int warmup, int timed, int per_sample, int64_t rotation_bytes,
                         int64_t l2_bytes);

LaunchDims dims_of(const ShapeJob& job);

}  // namespace evo::cuda
