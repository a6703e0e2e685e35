// The surrogate model (population/surrogate.h): learned from a history over genes alone, it ranks
// unseen genomes as an additive landscape ranks them, and learns which gene values keep failing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "rng.h"
#include "search_space.h"
#include "surrogate.h"

namespace evo {
namespace {

const SearchSpace& space() { return SearchSpace::for_template("fa_s512_v3"); }

// An additive landscape in ln µs: each gene value its own effect, drawn once from the seed; and
// every genome with STAGES=4 fails a gate.
std::optional<double> landscape_us(const Genome& g) {
  if (g.get("STAGES") == 4) return std::nullopt;
  double log_us = std::log(20.0);
  for (const auto& [name, value] : g.genes()) {
    DeterministicRng rng(std::hash<std::string>{}(name) ^ static_cast<uint64_t>(value), 5);
    log_us += 0.3 * (static_cast<double>(rng.below(1000)) / 1000.0 - 0.5);
  }
  return std::exp(log_us);
}

std::vector<ScoredCandidate> sample(uint64_t seed, int n) {
  DeterministicRng rng(seed, 1);
  std::vector<ScoredCandidate> out;
  for (int i = 0; i < n; ++i) {
    const Genome g = space().at(rng.below(space().size()));
    out.push_back({g, landscape_us(g)});
  }
  return out;
}

// Spearman's rank correlation of two equally long series (no ties expected).
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
    return r;
  };
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  double d2 = 0;
  for (size_t i = 0; i < ra.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  return 1 - 6 * d2 / (n * (n * n - 1));
}

TEST(Surrogate, FitsNothingFromFewerPassingGenomesThanItsMinimum) {
  std::vector<ScoredCandidate> passed, history;
  for (const auto& c : sample(3, 400)) (c.fitness_us ? passed : history).push_back(c);
  ASSERT_GE(passed.size(), static_cast<size_t>(Surrogate::kMinPassed));
  ASSERT_FALSE(history.empty());
  // Failures alone teach no time.
  history.insert(history.end(), passed.begin(), passed.begin() + Surrogate::kMinPassed - 1);
  EXPECT_FALSE(Surrogate::fit(space(), history).has_value());
  history.push_back(passed[Surrogate::kMinPassed - 1]);
  EXPECT_TRUE(Surrogate::fit(space(), history).has_value());
}

TEST(Surrogate, RanksUnseenGenomesAsTheLandscapeDoesAndLearnsAFailingValue) {
  const auto model = Surrogate::fit(space(), sample(1, 120));
  ASSERT_TRUE(model);
  std::vector<double> predicted, actual;
  std::vector<double> pass_when_failing, pass_otherwise;
  for (const auto& c : sample(2, 300)) {
    (c.fitness_us ? pass_otherwise : pass_when_failing).push_back(model->pass_probability(c.genome));
    if (!c.fitness_us) continue;
    predicted.push_back(model->predicted_log_us(c.genome));
    actual.push_back(std::log(*c.fitness_us));
  }
  ASSERT_GT(predicted.size(), 100u);
  ASSERT_GT(pass_when_failing.size(), 10u);
  const double rho = rank_correlation(predicted, actual);
  EXPECT_GT(rho, 0.8) << "rank correlation on held-out genomes";
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
  EXPECT_LT(mean(pass_when_failing), 0.3);
  EXPECT_GT(mean(pass_otherwise), 0.7);
}

TEST(Surrogate, TheHistorysOrderDoesNotChangeTheModel) {
  auto history = sample(7, 60);
  const auto a = Surrogate::fit(space(), history);
  std::reverse(history.begin(), history.end());
  const auto b = Surrogate::fit(space(), history);
  ASSERT_TRUE(a && b);
  for (const auto& c : sample(8, 20)) EXPECT_DOUBLE_EQ(a->score(c.genome), b->score(c.genome)) << c.genome.text();
}

}  // namespace
}  // namespace evo
