#pragma once
// The host-side arithmetic of gates 4 and 5, apart from any GPU so that it is tested everywhere:
// comparing an output, read back as floats by its family's runtime, with the float32 reference,
// and summarising launch times. Knows no family.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <string_view>

#include "tolerance.h"

namespace evo::cuda {

struct ErrorFigures {
  double rel_l2_error = 0;  // ||out - ref|| / ||ref|| over the finite, written elements
  double max_abs_error = 0;
  int64_t nonfinite = 0;    // NaN or Inf that is not the poison
  int64_t unwritten = 0;    // still the poison pattern
};

// out: the output as ProblemRuntime::read_output gives it (an element never written is
// unwritten_output(), family_runtime.h).
ErrorFigures compare_with_reference(const std::vector<float>& out, const std::vector<float>& reference);

// nullopt when the figures pass `tolerance` with every element written and finite; otherwise one
// line naming the problem (`where`, its text), the figure and the stage (e.g. "after 64
// back-to-back launches").
std::optional<std::string> correctness_failure(const ErrorFigures& f, std::string_view where,
                                               const Tolerance& tolerance, const std::string& stage);

struct TimingSummary {
  double median_us = 0, p10_us = 0, p90_us = 0;
  int samples = 0, launches_per_sample = 0;  // the graph replays timed, and launches in each
  // The same graph replayed on one input set, which stays in L2 (as a model's previous layer
  // leaves its output); 0 where not measured.
  double resident_median_us = 0;
};
// Percentiles by linear interpolation between order statistics. Empty input: all zeros.
TimingSummary summarise_times(std::vector<double> times_us);

// How many graph replays (samples) of how many launches each the timing gate runs.
struct TimingPlan {
  int launches_per_sample = 1, samples = 1;
};
// The plan for a kernel whose call the warm-up put at `call_us` (0: unknown). As asked for
// (`launches_per_sample` launches, or one per input set if there are more, in `timed` launches'
// worth of samples) unless those samples and the graph's own warm-up replay would take longer
// than `budget_us`; then the graph shrinks, not below `launches_per_sample`, until
// `min_samples` fit, and the samples are as many as fit, at least `min_samples`.
TimingPlan plan_timing(double call_us, int launches_per_sample, int sets, int timed,
                       double budget_us, int min_samples);

// The seed of one check's inputs: the run's seed mixed with the problem's words
// (FamilyRuntime::seed_words) and the check's number, so that checks never share inputs and a
// rerun sees the same ones.
uint64_t check_seed(uint64_t seed, const std::vector<int64_t>& problem_words, int check);

// Geometric mean of positive values (the fitness over shapes); 0 for an empty list.
double geometric_mean(const std::vector<double>& values);

// How many input sets to cycle so that their total exceeds max(rotation_bytes, 2 * l2_bytes),
// at least 1 and at most max_sets.
int rotation_sets(int64_t bytes_per_set, int64_t rotation_bytes, int64_t l2_bytes, int max_sets);

}  // namespace evo::cuda
