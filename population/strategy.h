#pragma once
// Search strategies: given what a run has measured so far, propose the next generation.
// Deterministic: the same history, generation and rng_seed give the same proposals, so a run is
// reproducible and a coordinator restarted mid-run proposes nothing different.
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_limits.h"
#include "evo/evo.pb.h"
#include "genome.h"
#include "search_space.h"
#include "problem.h"

namespace evo {

struct ScoredCandidate {
  Genome genome;
  std::optional<double> fitness_us;  // nullopt: failed a gate; lower is better
};

struct Offspring {
  Genome genome;
  std::string op;                    // "seed", "start", "random", "exhaustive", "crossover", "mutation", "crossover+mutation"
  std::vector<std::string> parents;  // parents' canonical genome texts
};

struct StrategyContext {
  const SearchSpace* space = nullptr;
  std::vector<Problem> shapes;  // a genome must be valid for every one; empty: the family's default_problem
  int64_t smem_limit = kDefaultSmemLimit;  // the target device's opt-in shared memory per block
  uint64_t rng_seed = 1;
  int top_k = 3;
  // Warm start: offered right after the default genome (op "start"), through the same checks as
  // any proposal, so an invalid or repeated one is dropped rather than proposed.
  std::vector<Genome> start_genomes;
  std::string run_id;  // only for log lines
  // False (evod, inside its store transaction): a generation that needs a list of valid genomes
  // not built yet is walked for at most a budget and else throws GenerationNotReady, while the
  // list is built on a thread of its own. True: the caller waits for the list.
  bool wait_for_lists = true;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Proposes up to `population` valid genomes never seen in `history` (the run's every evaluated
  // or proposed candidate) nor twice in the result, each canonical for the context's shapes
  // (SearchSpace::canonical: genes no shape uses at their defaults). Generation 0 always holds
  // the default genome, then the context's valid start genomes (as many as `population` leaves
  // room for).
  // Returns fewer, or none, when the space is exhausted.
  virtual std::vector<Offspring> next_generation(int generation,
                                                 const std::vector<ScoredCandidate>& history,
                                                 int population) = 0;
};

// A generation that cannot be proposed yet without a long computation on the caller's thread
// (StrategyContext::wait_for_lists false): the exhaustive strategy's list of valid genomes is being
// built on a thread of its own. The caller (evod, inside a transaction) defers the generation and
// asks again later; nothing was proposed.
class GenerationNotReady : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// evolve (tournament selection, crossover, mutation, elitism), random or exhaustive. Throws
// InputError for any other value (UNSPECIFIED, or a number this build does not know).
std::unique_ptr<Strategy> make_strategy(v1::SearchStrategy strategy, StrategyContext ctx);

// The Top-K of a history: fitness order, failed candidates excluded, ties broken by genome text.
std::vector<ScoredCandidate> top_k(const std::vector<ScoredCandidate>& history, int k);

}  // namespace evo
