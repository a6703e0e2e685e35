#include "gate_math.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "family_runtime.h"

namespace evo::cuda {

ErrorFigures compare_with_reference(const std::vector<float>& out, const std::vector<float>& ref) {
  ErrorFigures f;
  double diff2 = 0, ref2 = 0;
  const size_t n = std::min(out.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    if (is_unwritten_output(out[i])) {
      ++f.unwritten;
      continue;
    }
    const float o = out[i];
    if (!std::isfinite(o)) {
      ++f.nonfinite;
      continue;
    }
    const double d = static_cast<double>(o) - ref[i];
    diff2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
    f.max_abs_error = std::max(f.max_abs_error, std::fabs(d));
  }
  // Elements the output lacks count as unwritten too.
  f.unwritten += static_cast<int64_t>(ref.size() - n);
  f.rel_l2_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return f;
}

std::optional<std::string> correctness_failure(const ErrorFigures& f, std::string_view where_text,
                                               const Tolerance& tolerance, const std::string& stage) {
  char buf[256];
  const std::string where(where_text);
  if (f.unwritten > 0) {
    std::snprintf(buf, sizeof buf, "%s: %lld output elements never written %s", where.c_str(),
                  static_cast<long long>(f.unwritten), stage.c_str());
  } else if (f.nonfinite > 0) {
    std::snprintf(buf, sizeof buf, "%s: %lld NaN/Inf output elements %s", where.c_str(),
                  static_cast<long long>(f.nonfinite), stage.c_str());
  } else if (!(f.rel_l2_error <= tolerance.max_rel_l2_error)) {
    std::snprintf(buf, sizeof buf, "%s: relative L2 error %.3g > %.3g %s", where.c_str(),
                  f.rel_l2_error, tolerance.max_rel_l2_error, stage.c_str());
  } else if (!(f.max_abs_error <= tolerance.max_abs_error)) {
    std::snprintf(buf, sizeof buf, "%s: max abs error %.3g > %.3g %s", where.c_str(),
                  f.max_abs_error, tolerance.max_abs_error, stage.c_str());
  } else {
    return std::nullopt;
  }
  return std::string(buf);
}

TimingSummary summarise_times(std::vector<double> t) {
  TimingSummary s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  auto pct = [&](double p) {
    const double pos = p * static_cast<double>(t.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, t.size() - 1);
    return t[lo] + (t[hi] - t[lo]) * (pos - static_cast<double>(lo));
  };
  s.median_us = pct(0.5);
  s.p10_us = pct(0.1);
  s.p90_us = pct(0.9);
  return s;
}

TimingPlan plan_timing(double call_us, int launches_per_sample, int sets, int timed,
                       double budget_us, int min_samples) {
  const int floor_launches = std::max(1, launches_per_sample);
  TimingPlan plan;
  plan.launches_per_sample = std::max(floor_launches, sets);
  plan.samples = std::max(1, timed / floor_launches);
  const auto cost_us = [&](int launches, int samples) {
    return call_us * launches * (samples + 1.0);  // + the graph's own warm-up replay
  };
  if (call_us <= 0 || cost_us(plan.launches_per_sample, plan.samples) <= budget_us) return plan;
  const int fewest = std::min(std::max(1, min_samples), plan.samples);
  const int fit = static_cast<int>(budget_us / (call_us * (fewest + 1.0)));
  plan.launches_per_sample = std::clamp(fit, floor_launches, plan.launches_per_sample);
  const int samples_fit = static_cast<int>(budget_us / (call_us * plan.launches_per_sample)) - 1;
  plan.samples = std::clamp(samples_fit, fewest, plan.samples);
  return plan;
}

uint64_t check_seed(uint64_t seed, const std::vector<int64_t>& problem_words, int check) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;
  auto mix = [&](int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 0x100000001B3ull; };
  for (int64_t v : problem_words) mix(v);
  mix(check);
  return h;
}

double geometric_mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return std::exp(log_sum / static_cast<double>(v.size()));
}

int rotation_sets(int64_t bytes_per_set, int64_t rotation_bytes, int64_t l2_bytes, int max_sets) {
  const int64_t target = std::max(rotation_bytes, 2 * l2_bytes);
  if (bytes_per_set <= 0) return 1;
  const int64_t sets = target / bytes_per_set + 1;  // total strictly exceeds the target
  return static_cast<int>(std::clamp<int64_t>(sets, 1, std::max(1, max_sets)));
}

}  // namespace evo::cuda
