#include "surrogate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace evo {
namespace {

// Ridge penalty on the one-hot weights: a gene value seen in few passing genomes keeps a weight
// near 0 (the mean) rather than the whole of its few genomes' deviation.
constexpr double kRidge = 1.0;

// Solves A x = b for a symmetric positive definite A (n x n, row-major) by Cholesky.
std::vector<double> solve_spd(std::vector<double> a, std::vector<double> b, int n) {
  for (int j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    const double l = std::sqrt(std::max(d, 1e-12));
    a[j * n + j] = l;
    for (int i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / l;
    }
  }
  for (int i = 0; i < n; ++i) {  // L y = b
    for (int k = 0; k < i; ++k) b[i] -= a[i * n + k] * b[k];
    b[i] /= a[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {  // L^T x = y
    for (int k = i + 1; k < n; ++k) b[i] -= a[k * n + i] * b[k];
    b[i] /= a[i * n + i];
  }
  return b;
}

}  // namespace

Surrogate::Surrogate(const SearchSpace& space) {
  for (const auto& gene : space.genes()) {
    offset_.push_back(width_);
    values_.push_back(gene.values);
    width_ += static_cast<int>(gene.values.size());
  }
}

std::vector<int> Surrogate::features(const Genome& g) const {
  std::vector<int> out(values_.size(), -1);
  for (size_t i = 0; i < values_.size() && i < g.genes().size(); ++i) {
    const auto& domain = values_[i];
    const auto it = std::find(domain.begin(), domain.end(), g.genes()[i].second);
    if (it != domain.end()) out[i] = offset_[i] + static_cast<int>(it - domain.begin());
  }
  return out;
}

std::optional<Surrogate> Surrogate::fit(const SearchSpace& space, const std::vector<ScoredCandidate>& history) {
  Surrogate s(space);
  // Each genome once, by text (the best of its measurements), so the model is the history's in
  // any order.
  std::map<std::string, const ScoredCandidate*> unique;
  for (const auto& c : history) {
    if (c.genome.template_id() != space.id() || c.genome.genes().size() != space.genes().size()) continue;
    auto [it, inserted] = unique.emplace(c.genome.text(), &c);
    if (!inserted && c.fitness_us && (!it->second->fitness_us || *c.fitness_us < *it->second->fitness_us))
      it->second = &c;
  }
  const int n = s.width_;
  std::vector<std::vector<int>> passed_features;
  std::vector<double> log_us;
  std::vector<double> pass_count(n, 0), fail_count(n, 0);
  int passed = 0, failed = 0;
  for (const auto& [text, c] : unique) {
    const auto f = s.features(c->genome);
    auto& counts = c->fitness_us ? pass_count : fail_count;
    for (int k : f)
      if (k >= 0) counts[k] += 1;
    if (c->fitness_us) {
      ++passed;
      passed_features.push_back(f);
      log_us.push_back(std::log(*c->fitness_us));
    } else {
      ++failed;
    }
  }
  if (passed < kMinPassed) return std::nullopt;

  for (double y : log_us) s.intercept_ += y;
  s.intercept_ /= passed;
  std::vector<double> a(static_cast<size_t>(n) * n, 0), b(n, 0);
  for (int k = 0; k < n; ++k) a[k * n + k] = kRidge;
  for (size_t r = 0; r < passed_features.size(); ++r) {
    for (int i : passed_features[r]) {
      if (i < 0) continue;
      b[i] += log_us[r] - s.intercept_;
      for (int j : passed_features[r])
        if (j >= 0) a[i * n + j] += 1;
    }
  }
  s.weights_ = solve_spd(std::move(a), std::move(b), n);

  s.log_prior_odds_ = std::log((passed + 1.0) / (failed + 1.0));
  s.log_likelihood_ratio_.assign(n, 0);
  for (size_t gene = 0; gene < s.values_.size(); ++gene) {
    const double domain = static_cast<double>(s.values_[gene].size());
    for (int k = s.offset_[gene]; k < s.offset_[gene] + static_cast<int>(domain); ++k)
      s.log_likelihood_ratio_[k] =
          std::log((pass_count[k] + 1) / (passed + domain)) - std::log((fail_count[k] + 1) / (failed + domain));
  }
  return s;
}

double Surrogate::predicted_log_us(const Genome& g) const {
  double y = intercept_;
  for (int k : features(g))
    if (k >= 0) y += weights_[k];
  return y;
}

double Surrogate::pass_probability(const Genome& g) const {
  double log_odds = log_prior_odds_;
  for (int k : features(g))
    if (k >= 0) log_odds += log_likelihood_ratio_[k];
  return 1 / (1 + std::exp(-log_odds));
}

double Surrogate::score(const Genome& g) const {
  return predicted_log_us(g) - std::log(std::max(pass_probability(g), 1e-9));
}

}  // namespace evo
