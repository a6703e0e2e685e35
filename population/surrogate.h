#pragma once
// A cost model learned online from a run's own measurements, over its genes alone: the tuner
// knows nothing of the kernel (as Kernel Tuner's model-based strategies and MetaSchedule's cost
// model learn from what was measured). The surrogate strategy breeds many offspring per
// generation and sends the ones this model ranks most promising to the GPU.
//
// Two parts, both over one-hot gene values:
// - time: ridge regression of ln µs on the candidates that passed every gate;
// - passing: naive Bayes over pass/fail (a failure is any gate that stopped the candidate),
//   Laplace-smoothed, so a gene value that keeps failing pulls a genome's chance down.
// score = predicted ln µs - ln P(pass): lower is more promising (the expected speed of a proposal,
// counting the GPU time a failure wastes as no speed at all).
#include <optional>
#include <vector>

#include "genome.h"
#include "search_space.h"
#include "strategy.h"

namespace evo {

class Surrogate {
 public:
  // Fewer passing measurements than this fit nothing (fit() returns nullopt): too few to rank by.
  static constexpr int kMinPassed = 8;

  // Fitted to the history's candidates of `space` (other templates' genomes are ignored). The
  // same history in any order gives the same model.
  static std::optional<Surrogate> fit(const SearchSpace& space, const std::vector<ScoredCandidate>& history);

  // Lower is more promising. A genome of the space; a gene value the history never held adds
  // nothing to the time and is neutral for passing.
  double score(const Genome& g) const;
  double predicted_log_us(const Genome& g) const;
  double pass_probability(const Genome& g) const;

 private:
  explicit Surrogate(const SearchSpace& space);
  // Feature index of each gene's value (one-hot), or -1 when the value is outside the domain.
  std::vector<int> features(const Genome& g) const;

  std::vector<std::vector<int64_t>> values_;  // per gene, its domain
  std::vector<int> offset_;                   // per gene, the index of its first value's feature
  int width_ = 0;
  double intercept_ = 0;
  std::vector<double> weights_;               // ln µs per feature, about the intercept
  double log_prior_odds_ = 0;                 // ln P(pass) - ln P(fail)
  std::vector<double> log_likelihood_ratio_;  // per feature: ln P(value | pass) - ln P(value | fail)
};

}  // namespace evo
