#pragma once
// The evolutionary operators: tournament selection over measured candidates, uniform crossover,
// and mutation that moves a gene to a neighbouring value of its domain or to a random one.
#include <vector>

#include "genome.h"
#include "rng.h"
#include "search_space.h"
#include "strategy.h"

namespace evo {

// The best (lowest fitness_us; ties by genome text) of `size` candidates drawn with replacement
// from `pool`, which must be non-empty and hold only measured candidates.
const ScoredCandidate& tournament(const std::vector<ScoredCandidate>& pool, int size,
                                  DeterministicRng& rng);

// Each gene from `a` or `b` with equal chance. Both parents must be of the same space.
Genome uniform_crossover(const Genome& a, const Genome& b, DeterministicRng& rng);

// Each gene changes with probability 1/ngenes; if none did and `force` is set, one random gene
// does. A changed gene moves to a neighbouring domain value or (half the time) to any other
// value. Returns whether anything changed. Genes with a one-value domain never change.
bool mutate(Genome& g, const SearchSpace& space, DeterministicRng& rng, bool force);

}  // namespace evo
