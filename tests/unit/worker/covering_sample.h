#pragma once
// A covering sample of a set of genomes, for the compile sweep: few genomes such that every value
// any genome of the set holds for a gene is held by at least one of them. Generic over the space:
// genes are read from the genomes, never named.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "genome.h"
#include "search_space.h"

namespace evo::test {

// Every value each gene takes in `genomes`, by gene name. The genomes are of one space.
std::map<std::string, std::set<int64_t>> values_held(const std::vector<Genome>& genomes);

// Greedy set cover of values_held(pool): each step takes the genome that holds the most values
// not yet held by an earlier pick, ties to the earliest in an order shuffled with `seed`; stops
// once every value is held. The same pool and seed give the same picks.
std::vector<Genome> covering_sample(const std::vector<Genome>& pool, uint64_t seed);

// "BLOCK_M=16,32 SCHEDULE=sync,tma": the genes of `genes` that hold values, in that order, each
// value as genome text spells it; "-" for none.
std::string values_text(const std::map<std::string, std::set<int64_t>>& values,
                        const std::vector<Gene>& genes);

}  // namespace evo::test
