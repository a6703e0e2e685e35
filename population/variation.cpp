#include "variation.h"

#include <stdexcept>

namespace evo {
namespace {

bool better(const ScoredCandidate& a, const ScoredCandidate& b) {
  if (*a.fitness_us != *b.fitness_us) return *a.fitness_us < *b.fitness_us;
  return a.genome.text() < b.genome.text();
}

// Moves gene `i` off its current value; false if its domain has a single value.
bool change_gene(Genome& g, const Gene& gene, DeterministicRng& rng) {
  const auto& values = gene.values;
  if (values.size() < 2) return false;
  const int64_t current = g.get(gene.name);
  size_t pos = 0;
  while (pos < values.size() && values[pos] != current) ++pos;
  size_t next;
  if (pos == values.size() || rng.one_in(2)) {
    // Any other value (or any value at all if the current one is off the domain).
    next = rng.below(values.size() - (pos == values.size() ? 0 : 1));
    if (pos != values.size() && next >= pos) ++next;
  } else if (pos == 0) {
    next = 1;
  } else if (pos + 1 == values.size()) {
    next = pos - 1;
  } else {
    next = rng.one_in(2) ? pos - 1 : pos + 1;
  }
  g.set(gene.name, values[next]);
  return true;
}

}  // namespace

const ScoredCandidate& tournament(const std::vector<ScoredCandidate>& pool, int size,
                                  DeterministicRng& rng) {
  if (pool.empty()) throw std::logic_error("tournament over an empty pool");
  const ScoredCandidate* best = &pool[rng.below(pool.size())];
  for (int i = 1; i < size; ++i) {
    const ScoredCandidate& c = pool[rng.below(pool.size())];
    if (better(c, *best)) best = &c;
  }
  return *best;
}

Genome uniform_crossover(const Genome& a, const Genome& b, DeterministicRng& rng) {
  Genome child = a;
  for (const auto& [name, value] : b.genes())
    if (rng.one_in(2)) child.set(name, value);
  return child;
}

bool mutate(Genome& g, const SearchSpace& space, DeterministicRng& rng, bool force) {
  const auto& genes = space.genes();
  bool changed = false;
  for (const auto& gene : genes)
    if (rng.one_in(genes.size())) changed = change_gene(g, gene, rng) || changed;
  for (int tries = 0; force && !changed && tries < 8; ++tries)
    changed = change_gene(g, genes[rng.below(genes.size())], rng);
  return changed;
}

}  // namespace evo
