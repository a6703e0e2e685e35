#include "covering_sample.h"

#include <numeric>
#include <random>
#include <sstream>
#include <utility>

namespace evo::test {

std::map<std::string, std::set<int64_t>> values_held(const std::vector<Genome>& genomes) {
  std::map<std::string, std::set<int64_t>> held;
  for (const Genome& g : genomes)
    for (const auto& [gene, value] : g.genes()) held[gene].insert(value);
  return held;
}

std::vector<Genome> covering_sample(const std::vector<Genome>& pool, uint64_t seed) {
  // Fisher-Yates with the engine's raw output (its sequence is fixed by the standard, where
  // std::shuffle and the distributions are not), so the picks are the same on every toolchain.
  std::vector<size_t> order(pool.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);

  std::set<std::pair<std::string, int64_t>> uncovered;
  for (const auto& [gene, values] : values_held(pool))
    for (int64_t v : values) uncovered.emplace(gene, v);
  std::vector<Genome> picked;
  while (!uncovered.empty()) {
    size_t best = order.front(), best_gain = 0;
    for (size_t i : order) {
      size_t gain = 0;
      for (const auto& gene_value : pool[i].genes()) gain += uncovered.count(gene_value);
      if (gain > best_gain) best = i, best_gain = gain;
    }
    for (const auto& gene_value : pool[best].genes()) uncovered.erase(gene_value);
    picked.push_back(pool[best]);
  }
  return picked;
}

std::string values_text(const std::map<std::string, std::set<int64_t>>& values,
                        const std::vector<Gene>& genes) {
  std::ostringstream text;
  for (const Gene& gene : genes) {
    const auto it = values.find(gene.name);
    if (it == values.end() || it->second.empty()) continue;
    if (text.tellp() > 0) text << ' ';
    text << gene.name << '=';
    const char* sep = "";
    for (int64_t v : it->second) text << sep << gene.value_text(v), sep = ",";
  }
  return text.tellp() > 0 ? text.str() : "-";
}

}  // namespace evo::test
