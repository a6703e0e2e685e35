#include "strategy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "rng.h"
#include "surrogate.h"
#include "variation.h"
#include "wire_labels.h"

namespace evo {
namespace {

constexpr int kTournamentSize = 3;
constexpr uint64_t kCrossoverOneIn = 10;  // crossover for 9 of 10 children with distinct parents
// Past this many genomes, random top-up stops enumerating the space for its last unseen genomes,
// and exhaustive walks the whole space for every generation instead of a list of its valid
// genomes (walking a whole space per generation is what made the list worth its memory). A list
// costs one constraint check a genome, once per space, shapes and limit, and only where drawing
// cannot fill a batch; without it a shape or card that admits few genomes would end its runs on
// what drawing happened to find. The costs are in bench/NOTES.md ("Host-side costs").
constexpr uint64_t kEnumerableSize = uint64_t{1} << 23;
// Lists of valid genomes kept at once (one per template, shapes and shared-memory limit).
constexpr size_t kValidIndexLists = 64;
// Random draws per genome a random top-up still needs, before it gives up or enumerates. A draw
// costs one constraint check, so drawing must fill a typical batch well inside a SubmitRun
// deadline; too few draws left batches unfilled and fell back to listing every valid genome, in
// each new evod process, which outlasted that deadline under load (bench/NOTES.md, as above).
constexpr int kRandomDrawsPerGenome = 2048;
// How long an exhaustive generation may walk the space on the caller's thread (a submit, or a
// report inside evod's store transaction) while the list of valid genomes is being built.
constexpr auto kExhaustiveWalkBudget = std::chrono::milliseconds(300);

// Valid for every shape on a device with this shared-memory limit.
bool valid_for(const SearchSpace& space, const std::vector<Problem>& shapes, int64_t smem_limit,
               const Genome& g) {
  try {
    for (const auto& shape : shapes)
      if (space.violated_constraint(g, shape, smem_limit)) return false;
    return true;
  } catch (const InputError&) {  // e.g. a formula that divides by zero for this shape
    return false;
  }
}

// The indices of the space's genomes valid for these shapes and limit, in index order.
// Stops early, with the list short, once *stop is set.
std::shared_ptr<const std::vector<uint64_t>> list_valid(const SearchSpace& space,
                                                        const std::vector<Problem>& shapes,
                                                        int64_t smem_limit,
                                                        const std::atomic<bool>* stop = nullptr) {
  auto list = std::make_shared<std::vector<uint64_t>>();
  for (uint64_t i = 0, n = space.size(); i < n; ++i) {
    if (stop && stop->load(std::memory_order_relaxed)) break;
    if (valid_for(space, shapes, smem_limit, space.at(i))) list->push_back(i);
  }
  return list;
}

// The threads that build lists of valid genomes off the caller's thread. The process joins them
// when it exits: a build still going then stops at its next genome (nobody reads its list), so
// that no thread outlives the static objects it reads (the registered spaces, the log).
class ListBuilders {
 public:
  ~ListBuilders() {
    stopping_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : builders_) b.thread.join();
  }
  // Runs build(stopping) on a thread of its own; stopping is set when the process exits.
  void start(std::function<void(const std::atomic<bool>& stopping)> build) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Builders that finished are joined here, so a long-lived evod keeps no thread per list.
    for (auto it = builders_.begin(); it != builders_.end();) {
      if (*it->done) {
        it->thread.join();
        it = builders_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    builders_.push_back({std::thread([this, build = std::move(build), done] {
                           build(stopping_);
                           *done = true;
                         }),
                         done});
  }

 private:
  struct Builder {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<Builder> builders_;
};

ListBuilders& list_builders() {
  static ListBuilders builders;
  return builders;
}

bool by_fitness_then_text(const ScoredCandidate& a, const ScoredCandidate& b) {
  if (*a.fitness_us != *b.fitness_us) return *a.fitness_us < *b.fitness_us;
  return a.genome.text() < b.genome.text();
}

// One generation's proposals under construction: what is already known (history and this
// generation) and what is accepted so far.
class Batch {
 public:
  Batch(const std::vector<ScoredCandidate>& history, int population)
      : population_(std::max(population, 0)) {
    for (const auto& c : history) seen_.insert(c.genome.text());
  }
  int capacity() const { return population_; }
  bool full() const { return static_cast<int>(out_.size()) >= population_; }
  int size() const { return static_cast<int>(out_.size()); }
  bool seen(const Genome& g) const { return seen_.count(g.text()) > 0; }
  void add(Offspring o) {
    seen_.insert(o.genome.text());
    out_.push_back(std::move(o));
  }
  size_t count(std::string_view op) const {
    return std::count_if(out_.begin(), out_.end(), [&](const Offspring& o) { return o.op == op; });
  }
  std::vector<Offspring> take() { return std::move(out_); }

 private:
  int population_;
  std::set<std::string> seen_;
  std::vector<Offspring> out_;
};

class StrategyBase : public Strategy {
 public:
  explicit StrategyBase(StrategyContext ctx) : ctx_(std::move(ctx)) {
    if (!ctx_.space) throw std::invalid_argument("a strategy needs a search space");
    if (ctx_.shapes.empty()) {
      const KernelFamily& family = ctx_.space->family();
      ctx_.shapes.push_back(family.parse(family.default_problem, {}));
    }
    unused_genes_ = ctx_.space->unused_genes(ctx_.shapes);
  }

 protected:
  const SearchSpace& space() const { return *ctx_.space; }

  // Valid for every shape of the run on the target device.
  bool valid(const Genome& g) const { return valid_for(space(), ctx_.shapes, ctx_.smem_limit, g); }

  // Adds g, in its canonical form for the run's shapes, if it is valid and new; true if added.
  bool offer(Batch& batch, Offspring o) const {
    if (batch.full()) return false;
    o.genome = space().at_defaults(o.genome, unused_genes_);
    if (batch.seen(o.genome) || !valid(o.genome)) return false;
    batch.add(std::move(o));
    return true;
  }

  // The default genome and then the start genomes lead generation 0 (and any later one that
  // lacks them, after a restart or when a small population left no room for all).
  void add_seed(Batch& batch) const {
    offer(batch, {space().default_genome(), "seed", {}});
    for (const auto& g : ctx_.start_genomes) offer(batch, {g, "start", {}});
  }

  // The indices of the genomes valid for this run's shapes and device, in index order. Listing
  // them means checking every genome of the space (seconds for fa_s512_v3's 655,360, tens of
  // seconds on a loaded host), and evod builds a strategy per generation, so a registered
  // template's lists are kept for the process, per shapes and limit, and built on a thread of
  // their own: with wait false, a list not built yet is started (once) and nullptr returned at
  // once, so that no caller holds evod's store lock while it is built. A space built from JSON
  // (tests) has no stable identity and is listed on the caller's thread each time.
  // *started (when given) says whether this call started the build.
  std::shared_ptr<const std::vector<uint64_t>> valid_indices(bool wait, bool* started = nullptr) const {
    using List = std::shared_ptr<const std::vector<uint64_t>>;
    bool registered = false;
    try {
      registered = &SearchSpace::for_template(space().id()) == &space();
    } catch (const InputError&) {
    }
    if (!registered) return list_valid(space(), ctx_.shapes, ctx_.smem_limit);
    static std::mutex mutex;
    static std::map<std::string, std::shared_future<List>> lists;
    std::string key = space().id() + " smem " + std::to_string(ctx_.smem_limit);
    for (const auto& shape : ctx_.shapes) key += " " + shape.text();
    std::shared_future<List> list;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = lists.find(key);
      if (it == lists.end()) {
        if (lists.size() >= kValidIndexLists) lists.clear();  // a long-lived evod serving many shapes
        if (started) *started = true;
        auto promise = std::make_shared<std::promise<List>>();
        it = lists.emplace(key, promise->get_future().share()).first;
        // The space is a registered template's: it lives as long as the process.
        list_builders().start([promise, space = &space(), shapes = ctx_.shapes, smem = ctx_.smem_limit,
                               key](const std::atomic<bool>& stopping) {
          const auto began = std::chrono::steady_clock::now();
          List built = list_valid(*space, shapes, smem, &stopping);
          if (!stopping)
            spdlog::info("event=valid_genomes_listed key=\"{}\" valid={} ms={}", key, built->size(),
                         std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began)
                             .count());
          promise->set_value(std::move(built));
        });
      }
      list = it->second;
    }
    if (wait) return list.get();
    return list.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? list.get() : nullptr;
  }

  // Random valid unseen genomes until the batch is full: rejection sampling first; if that
  // stalls (a nearly exhausted space), a random pick among the remaining ones.
  void fill_random(Batch& batch, DeterministicRng& rng) const {
    const uint64_t n = space().size();
    for (int attempt = 0; attempt < 256 + kRandomDrawsPerGenome * batch.capacity() && !batch.full();
         ++attempt)
      offer(batch, {space().at(rng.below(n)), "random", {}});
    if (batch.full() || n > kEnumerableSize) return;
    std::vector<uint64_t> left;
    const auto valid_list = valid_indices(ctx_.wait_for_lists);  // held: a range-for would drop the temporary
    if (!valid_list)
      throw GenerationNotReady("random draws left the batch short; the list of valid " + space().id() +
                               " genomes it is topped up from is still being built");
    for (uint64_t i : *valid_list) {
      if (!batch.seen(space().at(i))) left.push_back(i);
    }
    for (size_t k = 0; k < left.size() && !batch.full(); ++k) {
      std::swap(left[k], left[k + rng.below(left.size() - k)]);
      offer(batch, {space().at(left[k]), "random", {}});
    }
  }

  void log_generation(const char* strategy, int generation, const Batch& batch, size_t total) const {
    spdlog::debug("event=generation_bred run_id={} strategy={} generation={} proposed={} seed={} start={} random={}",
                  ctx_.run_id, strategy, generation, total, batch.count("seed"), batch.count("start"),
                  batch.count("random"));
  }

  StrategyContext ctx_;
  std::vector<size_t> unused_genes_;  // the run's canonical form: these genes at their defaults
};

class RandomStrategy : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;
  std::vector<Offspring> next_generation(int generation, const std::vector<ScoredCandidate>& history,
                                         int population) override {
    DeterministicRng rng(ctx_.rng_seed, static_cast<uint64_t>(generation));
    Batch batch(history, population);
    add_seed(batch);
    fill_random(batch, rng);
    auto out = batch.take();
    log_generation("random", generation, batch, out.size());
    return out;
  }
};

class ExhaustiveStrategy : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;
  std::vector<Offspring> next_generation(int generation, const std::vector<ScoredCandidate>& history,
                                         int population) override {
    Batch batch(history, population);
    add_seed(batch);
    if (space().size() > kEnumerableSize) {
      for (uint64_t i = 0, n = space().size(); i < n && !batch.full(); ++i)
        offer(batch, {space().at(i), "exhaustive", {}});
    } else if (bool started = false; const auto valid_list = valid_indices(ctx_.wait_for_lists, &started)) {
      for (uint64_t i : *valid_list) {
        if (batch.full()) break;
        offer(batch, {space().at(i), "exhaustive", {}});
      }
    } else if (started) {
      // The list is being built from now: the same walk in index order, within a budget.
      walk(batch, std::chrono::steady_clock::now() + kExhaustiveWalkBudget);
    } else {
      // Being built since an earlier call, whose walk ran out: not walked again while it is.
      throw GenerationNotReady("exhaustive: the list of valid " + space().id() + " genomes is still being built");
    }
    auto out = batch.take();
    log_generation("exhaustive", generation, batch, out.size());
    return out;
  }

 private:
  // Offers the space's genomes in index order, as the list of valid genomes would: a genome
  // invalid as indexed is skipped before its canonical form is offered. Past `until` with the
  // batch not full, throws GenerationNotReady.
  void walk(Batch& batch, std::chrono::steady_clock::time_point until) const {
    for (uint64_t i = 0, n = space().size(); i < n && !batch.full(); ++i) {
      if ((i & 63) == 0 && std::chrono::steady_clock::now() > until)
        throw GenerationNotReady("exhaustive: the list of valid " + space().id() +
                                 " genomes is still being built; the generation waits for it");
      const Genome g = space().at(i);
      if (batch.seen(space().at_defaults(g, unused_genes_)) || !valid(g)) continue;
      offer(batch, {g, "exhaustive", {}});
    }
  }
};

class EvolveStrategy : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;
  std::vector<Offspring> next_generation(int generation, const std::vector<ScoredCandidate>& history,
                                         int population) override {
    DeterministicRng rng(ctx_.rng_seed, static_cast<uint64_t>(generation));
    Batch batch(history, population);
    add_seed(batch);
    const auto pool = breeding_pool(history);
    if (generation > 0 && !pool.empty()) propose(batch, pool, history, rng, generation);
    // Generation 0, a history with no success yet, or a stall: random valid genomes.
    fill_random(batch, rng);
    auto out = batch.take();
    log_generation(name(), generation, batch, out.size());
    return out;
  }

 protected:
  virtual const char* name() const { return "evolve"; }

  // Fills the batch with children of the pool.
  virtual void propose(Batch& batch, const std::vector<ScoredCandidate>& pool,
                       const std::vector<ScoredCandidate>& history, DeterministicRng& rng, int generation) const {
    breed_into(batch, pool, rng, generation, true);
  }

  // Children of the pool until the batch is full or the attempts run out (then, for a
  // generation's own batch, logged: it is topped up with random genomes).
  void breed_into(Batch& batch, const std::vector<ScoredCandidate>& pool, DeterministicRng& rng, int generation,
                  bool generations_own) const {
    int attempts = 0;
    const int max_attempts = 256 + 64 * std::max(batch.capacity(), 0);
    while (!batch.full() && attempts++ < max_attempts) offer(batch, breed(pool, rng));
    if (!batch.full() && generations_own)
      spdlog::info("event=breeding_stalled run_id={} strategy={} generation={} attempts={} "
                   "topping up with random genomes",
                   ctx_.run_id, name(), generation, attempts);
  }

 private:
  // Measured candidates of this space, best first, each genome once. Sorting makes the
  // proposals independent of the order in which the history was loaded.
  std::vector<ScoredCandidate> breeding_pool(const std::vector<ScoredCandidate>& history) const {
    std::vector<ScoredCandidate> pool;
    for (const auto& c : history)
      if (c.fitness_us && fits_space(c.genome)) pool.push_back(c);
    std::sort(pool.begin(), pool.end(), by_fitness_then_text);
    std::set<std::string> kept;
    pool.erase(std::remove_if(pool.begin(), pool.end(),
                              [&](const ScoredCandidate& c) { return !kept.insert(c.genome.text()).second; }),
               pool.end());
    return pool;
  }

  bool fits_space(const Genome& g) const {
    const auto& genes = space().genes();
    if (g.template_id() != space().id() || g.genes().size() != genes.size()) return false;
    for (size_t i = 0; i < genes.size(); ++i)
      if (g.genes()[i].first != genes[i].name) return false;
    return true;
  }

  Offspring breed(const std::vector<ScoredCandidate>& pool, DeterministicRng& rng) const {
    const Genome& a = tournament(pool, kTournamentSize, rng).genome;
    const Genome* b = &tournament(pool, kTournamentSize, rng).genome;
    for (int t = 0; t < 4 && pool.size() > 1 && *b == a; ++t) b = &tournament(pool, kTournamentSize, rng).genome;

    const bool crossed = *b != a && !rng.one_in(kCrossoverOneIn);
    Offspring child{crossed ? uniform_crossover(a, *b, rng) : a, "", {a.text()}};
    if (crossed) child.parents.push_back(b->text());
    // A child identical to a parent is already known: it must mutate to be worth proposing.
    const bool copy_of_parent = child.genome == a || child.genome == *b;
    const bool mutated = mutate(child.genome, space(), rng, copy_of_parent);
    child.op = crossed && mutated ? "crossover+mutation" : crossed ? "crossover" : "mutation";
    return child;
  }
};

// Evolution screened by a model of the run's own measurements (surrogate.h): each generation
// breeds kScreenFactor times the children it has room for, sends the ones the model ranks most
// promising, and keeps one slot in kExploreOneIn for children in breeding order whatever the
// model says, so that a wrong model still meets the genomes that would correct it. Until the
// history holds Surrogate::kMinPassed passing genomes it is plain evolution.
class SurrogateStrategy : public EvolveStrategy {
 public:
  using EvolveStrategy::EvolveStrategy;

 protected:
  static constexpr int kScreenFactor = 8;
  static constexpr int kExploreOneIn = 4;

  const char* name() const override { return "surrogate"; }

  void propose(Batch& batch, const std::vector<ScoredCandidate>& pool, const std::vector<ScoredCandidate>& history,
               DeterministicRng& rng, int generation) const override {
    const auto model = Surrogate::fit(space(), history);
    if (!model) return breed_into(batch, pool, rng, generation, true);
    const int room = batch.capacity() - batch.size();
    Batch wide(history, room * kScreenFactor);
    breed_into(wide, pool, rng, generation, false);
    std::vector<Offspring> bred = wide.take();
    std::vector<double> score(bred.size());
    for (size_t i = 0; i < bred.size(); ++i) score[i] = model->score(bred[i].genome);
    std::vector<size_t> order(bred.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
    const int exploit = room - room / kExploreOneIn;
    std::vector<bool> sent(bred.size(), false);
    for (size_t k = 0; k < order.size() && batch.size() < batch.capacity() - (room - exploit); ++k)
      sent[order[k]] = offer(batch, bred[order[k]]);
    for (size_t i = 0; i < bred.size() && !batch.full(); ++i)
      if (!sent[i]) sent[i] = offer(batch, bred[i]);
    spdlog::info("event=generation_screened run_id={} generation={} bred={} sent={} best_score={:.4f}", ctx_.run_id,
                 generation, bred.size(), std::count(sent.begin(), sent.end(), true),
                 order.empty() ? 0.0 : score[order.front()]);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(v1::SearchStrategy strategy, StrategyContext ctx) {
  switch (strategy) {
    case v1::SEARCH_STRATEGY_EVOLVE: return std::make_unique<EvolveStrategy>(std::move(ctx));
    case v1::SEARCH_STRATEGY_RANDOM: return std::make_unique<RandomStrategy>(std::move(ctx));
    case v1::SEARCH_STRATEGY_EXHAUSTIVE: return std::make_unique<ExhaustiveStrategy>(std::move(ctx));
    case v1::SEARCH_STRATEGY_SURROGATE: return std::make_unique<SurrogateStrategy>(std::move(ctx));
    default: break;
  }
  throw InputError("unknown strategy " + std::to_string(static_cast<int>(strategy)) + " (known: " +
                   label_list<v1::SearchStrategy>() + ")");
}

std::vector<ScoredCandidate> top_k(const std::vector<ScoredCandidate>& history, int k) {
  std::vector<ScoredCandidate> measured;
  for (const auto& c : history)
    if (c.fitness_us) measured.push_back(c);
  std::sort(measured.begin(), measured.end(), by_fitness_then_text);
  std::vector<ScoredCandidate> best;
  std::set<std::string> kept;
  for (auto& c : measured) {
    if (static_cast<int>(best.size()) >= k) break;
    if (kept.insert(c.genome.text()).second) best.push_back(std::move(c));
  }
  return best;
}

}  // namespace evo
