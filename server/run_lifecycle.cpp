#include "run_lifecycle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "device_limits.h"
#include "duration_text.h"
#include "errors.h"
#include "genome_proto.h"
#include "search_space.h"
#include "server_config.h"
#include "family.h"
#include "strategy.h"
#include "wire_labels.h"

namespace evo {

namespace {

using Code = CoordinatorError::Code;

std::string join_parents(const std::vector<std::string>& parents) {
  std::string out;
  for (size_t i = 0; i < parents.size(); ++i) out += (i ? ";" : "") + parents[i];
  return out;
}

// A submit's choice of an enum (strategy, fitness inputs): the enum field, else the label an older
// evoctl sent, else the default; a number this build does not know or a label that names no value
// is an InputError.
template <class E>
E submitted_choice(E value, const std::string& text, E fallback, const char* field) {
  if (value == E{}) {
    if (text.empty()) return fallback;
    if (const auto parsed = parse_label<E>(text)) return *parsed;
  } else if (!label(value).empty()) {
    return value;
  }
  throw InputError(std::string(field) + " must be one of " + label_list<E>() + ", got " +
                   (value == E{} ? "'" + text + "'" : std::to_string(static_cast<int>(value))));
}

std::unique_ptr<Strategy> strategy_for(const RunRecord& run, const SearchSpace& space) {
  StrategyContext ctx;
  ctx.space = &space;
  ctx.shapes = shapes_of(run);
  ctx.smem_limit = run.smem_limit;
  ctx.rng_seed = run.rng_seed;
  ctx.top_k = run.top_k;
  for (const auto& text : run.start_genomes) ctx.start_genomes.push_back(space.parse(text));
  ctx.run_id = run.id;
  ctx.wait_for_lists = false;  // evod never builds a list under its store lock
  return make_strategy(run.strategy, ctx);
}

// A submit's start genomes, each read once and named for its errors: the typed ones where the
// request has any (evoctl parsed them; one that does not read is named by its index, one that
// does by its text), else the texts (an older evoctl, or a hand-made request).
std::vector<std::pair<std::string, Genome>> submitted_start_genomes(const v1::SubmitRunRequest& req,
                                                                    const SearchSpace& space) {
  std::vector<std::pair<std::string, Genome>> out;
  for (int i = 0; i < req.typed_start_genomes_size(); ++i) {
    const v1::Genome& m = req.typed_start_genomes(i);
    const std::string at = "typed_start_genomes[" + std::to_string(i) + "]";
    if (!m.kernel().empty() && m.kernel() != space.id())
      throw InputError(at + " is a genome of '" + m.kernel() + "', not of the seed '" + space.id() + "'");
    Genome g;
    try {
      g = genome_from_proto(m);
    } catch (const InputError& e) {
      throw InputError(at + ": " + e.what());
    }
    out.emplace_back("start genome '" + g.text() + "'", g);
  }
  if (!out.empty()) return out;
  for (const auto& text : req.start_genomes()) {
    const std::string named = "start genome '" + text + "'";
    try {
      out.emplace_back(named, space.parse(text));
    } catch (const InputError& e) {
      throw InputError(named + ": " + e.what());
    }
  }
  return out;
}

// Why the run's wall-time budget is spent at `now`; nullopt while it is not (or it has none, or
// it has not started).
std::optional<std::string> spent_time(const RunRecord& run, int64_t now) {
  if (run.budget_ms <= 0 || run.started_ms <= 0 || now - run.started_ms < run.budget_ms) return std::nullopt;
  return "budget of " + duration_text(run.budget_ms) + " spent";
}

// Generations in a row, up to `last`, whose best time is no better than the best before them
// (generation 0 improves on nothing when it has a time at all).
int generations_without_improvement(const std::vector<CandidateRecord>& candidates, int last) {
  std::vector<double> best(static_cast<size_t>(last) + 1, std::numeric_limits<double>::infinity());
  for (const auto& c : candidates)
    if (c.generation <= last && c.fitness_us) best[c.generation] = std::min(best[c.generation], *c.fitness_us);
  double so_far = std::numeric_limits<double>::infinity();
  int stale = 0;
  for (double b : best) {
    if (b < so_far) {
      so_far = b;
      stale = 0;
    } else {
      ++stale;
    }
  }
  return stale;
}

// How many candidates the next generation may hold: the population, or fewer where max_evals
// leaves fewer evaluations (`evaluated` of them spent).
int generation_size(const RunRecord& run, int evaluated) {
  return run.max_evals > 0 ? std::max(0, std::min(run.population, run.max_evals - evaluated)) : run.population;
}

// The canonical texts of a submit's start genomes (genes that none of the run's shapes uses at
// their defaults, as the strategy proposes them), each checked as the strategy will check it, so
// that a genome the strategy would drop is refused now instead. Constraints that read SM_ARCH are
// skipped, as by the strategy: the target is unknown until a worker leases, and the worker's valid
// gate reports such a genome INVALID. The smem limit is the run's, fixed at submit.
std::vector<std::string> check_start_genomes(const v1::SubmitRunRequest& req, const RunRecord& run,
                                             const SearchSpace& space) {
  const auto shapes = shapes_of(run);
  std::vector<std::string> out;
  for (const auto& [named, submitted] : submitted_start_genomes(req, space)) {
    const Genome g = space.canonical(submitted, shapes);
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::optional<std::string> violated;
      try {
        violated = space.violated_constraint(g, shapes[i], run.smem_limit);
      } catch (const InputError& e) {
        throw InputError(named + " cannot be checked for shape " + run.shapes[i] + ": " + e.what());
      }
      if (violated)
        throw InputError(named + " violates constraint '" + *violated + "' for shape " + run.shapes[i]);
    }
    if (std::find(out.begin(), out.end(), g.text()) == out.end()) out.push_back(g.text());
  }
  // Generation 0 must hold them all beside the default genome.
  const std::string seed_genome = space.default_genome().text();
  const int needed = static_cast<int>(out.size()) + (std::find(out.begin(), out.end(), seed_genome) == out.end());
  const int first = generation_size(run, 0);
  if (!out.empty() && needed > first) {
    const bool seed_among = needed == static_cast<int>(out.size());
    throw InputError(std::to_string(out.size()) + " distinct start genomes" +
                     (seed_among ? " (the default genome among them)" : " and the default genome") +
                     " need a population of " + std::to_string(needed) + ", got " + std::to_string(first) +
                     (first < run.population ? " (max_evals)" : ""));
  }
  return out;
}

// The run a submit asks for, with the defaults filled in, every field checked (InputError), and
// its shapes and start genomes in canonical text. Its id is not assigned yet.
RunRecord run_of_request(const v1::SubmitRunRequest& req, const SearchSpace& space, int64_t now_ms) {
  RunRecord run;
  run.seed = req.seed();
  const KernelFamily& family = space.family();
  const ProblemDefaults defaults = family.submit_defaults(req);
  std::vector<std::string> texts(req.shapes().begin(), req.shapes().end());
  if (texts.empty()) texts.emplace_back(family.default_problem);
  for (const auto& text : texts) {
    Problem p = family.parse(text, defaults);
    family.require_tunable(p, text);
    space.require_serves(p, text);
    run.shapes.push_back(p.text());
  }
  run.generations = req.has_generations() ? req.generations() : server::kDefaultGenerations;
  run.population = req.has_population() ? req.population() : server::kDefaultPopulation;
  run.top_k = req.has_top_k() ? req.top_k() : server::kDefaultTopK;
  if (run.generations <= 0 || run.generations > server::kMaxGenerations)
    throw InputError("generations must be in 1.." + std::to_string(server::kMaxGenerations) + ", got " +
                     std::to_string(run.generations));
  if (run.population <= 0 || run.population > server::kMaxPopulation)
    throw InputError("population must be in 1.." + std::to_string(server::kMaxPopulation) + ", got " +
                     std::to_string(run.population));
  if (run.top_k <= 0 || run.top_k > run.population)
    throw InputError("top_k must be in 1..population (" + std::to_string(run.population) + "), got " +
                     std::to_string(run.top_k) + (req.has_top_k() ? "" : " (the default)"));
  if (req.budget_ms() < 0) throw InputError("budget must be positive (0: none), got " + std::to_string(req.budget_ms()) + " ms");
  if (req.max_evals() < 0) throw InputError("max_evals must be positive (0: none), got " + std::to_string(req.max_evals()));
  if (req.patience() < 0) throw InputError("patience must be positive (0: none), got " + std::to_string(req.patience()));
  if (!(std::isfinite(req.target_us()) && req.target_us() >= 0))
    throw InputError("target_us must be a positive time in µs (0: none), got " + fmt::format("{}", req.target_us()));
  run.budget_ms = req.budget_ms();
  run.max_evals = req.max_evals();
  run.patience = req.patience();
  run.target_us = req.target_us();
  run.strategy = submitted_choice(req.search_strategy(), req.strategy(), server::kDefaultStrategy, "strategy");
  run.rng_seed = req.rng_seed() == 0 ? server::kDefaultRngSeed : req.rng_seed();
  run.device_class = req.device_class();
  run.smem_limit = kDefaultSmemLimit;  // device_limits.h: fixed per run
  run.start_genomes = check_start_genomes(req, run, space);
  run.fitness_inputs =
      submitted_choice(req.fitness_from(), req.fitness_inputs(), server::kDefaultFitnessInputs, "fitness_inputs");
  run.state = v1::QUEUED;
  run.created_ms = now_ms;
  run.request_id = req.request_id();
  return run;
}

void insert_generation(Store& store, const RunRecord& run, int generation,
                       const std::vector<Offspring>& offspring, int first_seq) {
  int seq = first_seq;
  for (const auto& o : offspring) {
    CandidateRecord c;
    char id[64];
    std::snprintf(id, sizeof id, "%s-c%04d", run.id.c_str(), seq);
    c.id = id;
    c.run_id = run.id;
    c.generation = generation;
    c.seq = seq++;
    c.genome = o.genome.text();
    c.genome_hash = o.genome.hash();
    c.op = o.op;
    c.parents = join_parents(o.parents);
    store.insert_candidate(c);
  }
}

}  // namespace

bool is_terminal(int state) { return state == v1::DONE || state == v1::CANCELLED || state == v1::FAILED; }

std::vector<Problem> shapes_of(const RunRecord& run) {
  std::vector<Problem> out;
  const KernelFamily& family = SearchSpace::for_template(run.seed).family();
  for (const auto& s : run.shapes) out.push_back(family.parse(s, {}));
  return out;
}

RunRecord require_run(Store& store, const std::string& run_id) {
  auto run = store.get_run(run_id);
  if (!run) throw CoordinatorError(Code::kNotFound, "unknown run '" + run_id + "'");
  return *run;
}

RunLifecycle::RunLifecycle(Store& store, Clock clock) : store_(store), clock_(std::move(clock)) {}

RunRecord RunLifecycle::submit(const v1::SubmitRunRequest& req) {
  // A retried submit (the same client request id) returns the run the first one made.
  if (auto again = repeated_submit(req)) return *again;
  // Everything is validated before the transaction opens: bad input writes nothing.
  RunRecord run;
  std::vector<Offspring> generation0;
  bool waits_for_list = false;
  try {
    if (req.seed().empty()) throw InputError("missing seed (e.g. fa_s512_v3)");
    const SearchSpace& space = SearchSpace::for_template(req.seed());
    run = run_of_request(req, space, clock_());
    // make_strategy rejects an unknown strategy name; generation 0 is computed before any write.
    run.id = "pending";
    generation0 = strategy_for(run, space)->next_generation(0, {}, generation_size(run, 0));
  } catch (const InputError& e) {
    throw CoordinatorError(Code::kInvalidArgument, e.what());
  } catch (const GenerationNotReady&) {
    // Stored with generation 0 pending: the sweeper breeds it once the list is built.
    waits_for_list = true;
  }
  if (generation0.empty() && !waits_for_list)
    throw CoordinatorError(Code::kInvalidArgument, "no valid genome of " + run.seed + " serves these shapes");

  std::optional<RunRecord> repeated;
  store_.transaction([&] {
    if ((repeated = store_.run_of_request(req.request_id()))) return;  // a retry that raced the first
    run.id = store_.next_run_id();
    store_.insert_run(run);
    insert_generation(store_, run, 0, generation0, 0);
  });
  if (repeated) return *repeated;
  spdlog::info("event=run_submitted run_id={} seed={} shapes={} generations={} population={} top_k={} "
               "strategy={} rng_seed={} device_class=\"{}\" start_genomes={} fitness_inputs={} candidates={} "
               "request_id=\"{}\" budget_ms={} max_evals={} patience={} target_us={}{}",
               run.id, run.seed, run.shapes.size(), run.generations, run.population, run.top_k,
               label(run.strategy), run.rng_seed, run.device_class, run.start_genomes.size(),
               label(run.fitness_inputs), generation0.size(), run.request_id, run.budget_ms, run.max_evals,
               run.patience, run.target_us,
               waits_for_list ? " generation0=pending" : "");
  return run;
}

std::optional<RunRecord> RunLifecycle::repeated_submit(const v1::SubmitRunRequest& req) {
  if (req.request_id().empty()) return std::nullopt;
  std::optional<RunRecord> run;
  store_.transaction([&] { run = store_.run_of_request(req.request_id()); });
  if (run) spdlog::info("event=run_submit_repeated run_id={} request_id=\"{}\"", run->id, req.request_id());
  return run;
}

RunRecord RunLifecycle::cancel(const std::string& run_id) {
  RunRecord run;
  store_.transaction([&] {
    run = require_run(store_, run_id);
    if (!is_terminal(run.state)) {
      end(run, v1::CANCELLED, v1::STOP_REASON_CANCELLED, "cancelled by request");
    }
  });
  return run;
}

void RunLifecycle::fix_device_class(RunRecord& run, const std::string& device_class) {
  store_.set_run_device_class(run.id, device_class);
  run.device_class = device_class;
}

void RunLifecycle::mark_running(RunRecord& run) {
  if (run.state != v1::QUEUED) return;
  run.started_ms = clock_();
  store_.set_run_started(run.id, run.started_ms);
  run.state = v1::RUNNING;
}

void RunLifecycle::end(RunRecord& run, v1::RunState state, v1::StopReason why, const std::string& message) {
  run.ended_ms = clock_();
  store_.end_run(run.id, state, why, message, run.ended_ms);
  run.state = state;
  run.stop_reason = why;
  run.message = message;
  const auto level = state == v1::FAILED ? spdlog::level::err : spdlog::level::info;
  spdlog::log(level, "event=run_{} run_id={} generation={} reason={} message=\"{}\"",
              state == v1::DONE ? "done" : state == v1::CANCELLED ? "cancelled" : "failed", run.id,
              run.current_generation, label(why), message);
}

std::optional<std::pair<v1::StopReason, std::string>> RunLifecycle::spent_budget(const RunRecord& run,
                                                                               int completed) {
  if (completed + 1 >= run.generations) return std::make_pair(v1::STOP_REASON_GENERATIONS_DONE, std::string());
  if (run.max_evals > 0) {
    const int evaluated = store_.count_candidates_of_run(run.id).done;
    if (generation_size(run, evaluated) == 0)
      return std::make_pair(v1::STOP_REASON_MAX_EVALS, "max_evals " + std::to_string(run.max_evals) + " reached");
  }
  if (run.patience > 0) {
    const int stale = generations_without_improvement(store_.candidates_of_run(run.id), completed);
    if (stale >= run.patience)
      return std::make_pair(v1::STOP_REASON_NO_IMPROVEMENT,
                            "no better time in the last " + std::to_string(stale) + " generations (patience " +
                                std::to_string(run.patience) + ")");
  }
  if (auto spent = spent_time(run, clock_())) return std::make_pair(v1::STOP_REASON_BUDGET_SPENT, *spent);
  return std::nullopt;
}

int RunLifecycle::end_spent_budgets() {
  int ended = 0;
  const int64_t now = clock_();
  for (auto& run : store_.active_runs()) {
    if (auto spent = spent_time(run, now)) {
      end(run, v1::DONE, v1::STOP_REASON_BUDGET_SPENT, *spent);
      ++ended;
    }
  }
  return ended;
}

std::optional<std::string> RunLifecycle::target_reached(const RunRecord& run) {
  if (run.target_us <= 0) return std::nullopt;
  const auto best = store_.elite_candidates(run.id, 1);
  if (best.empty() || *best.front().fitness_us > run.target_us) return std::nullopt;
  return fmt::format("target of {:.3f} µs reached: candidate {} confirmed at {:.3f} µs", run.target_us,
                     best.front().id, *best.front().fitness_us);
}

void RunLifecycle::advance_if_generation_complete(const std::string& run_id) {
  RunRecord run = require_run(store_, run_id);
  if (is_terminal(run.state)) return;
  // Checked at every report, not only at a generation's end: the GPU time after it buys nothing
  // the submit asked for.
  if (auto reached = target_reached(run)) return end(run, v1::DONE, v1::STOP_REASON_TARGET_REACHED, *reached);
  const int g = run.current_generation;
  const int proposed = store_.count_candidates(run_id, g, false);
  // A generation with no candidate waits to be bred (its strategy was not ready).
  if (proposed == 0) return breed(run, g);
  if (store_.count_candidates(run_id, g, true) < proposed) return;
  if (auto spent = spent_budget(run, g)) return end(run, v1::DONE, spent->first, spent->second);
  breed(run, g + 1);
}

int RunLifecycle::breed_waiting_generations() {
  int waiting = 0;
  for (const auto& run : store_.active_runs()) {
    if (store_.count_candidates(run.id, run.current_generation, false) > 0) continue;
    ++waiting;
    advance_if_generation_complete(run.id);
  }
  return waiting;
}

void RunLifecycle::breed(RunRecord& run, int generation) {
  const SearchSpace& space = SearchSpace::for_template(run.seed);
  auto candidates = store_.candidates_of_run(run.id);
  std::vector<ScoredCandidate> history;
  for (const auto& c : candidates) history.push_back({space.parse(c.genome), c.fitness_us});
  int evaluated = 0;
  for (const auto& c : candidates) evaluated += c.state == v1::CANDIDATE_STATE_DONE;
  std::vector<Offspring> next;
  try {
    next = strategy_for(run, space)->next_generation(generation, history, generation_size(run, evaluated));
  } catch (const GenerationNotReady& e) {
    // Asked again by the sweeper (breed_waiting_generations) until the strategy is ready.
    spdlog::debug("event=generation_waiting run_id={} generation={} reason=\"{}\"", run.id, generation, e.what());
    if (generation != run.current_generation) store_.set_run_generation(run.id, generation);
    return;
  } catch (const std::exception& e) {
    return end(run, v1::FAILED, v1::STOP_REASON_FAILED, std::string("strategy failed: ") + e.what());
  }
  if (next.empty() && generation == 0)
    return end(run, v1::FAILED, v1::STOP_REASON_FAILED, "no valid genome of " + run.seed + " serves these shapes");
  if (next.empty()) return end(run, v1::DONE, v1::STOP_REASON_SPACE_EXHAUSTED, "search space exhausted");
  insert_generation(store_, run, generation, next, static_cast<int>(candidates.size()));
  if (generation != run.current_generation) store_.set_run_generation(run.id, generation);
  spdlog::info("event=generation_bred run_id={} generation={} candidates={}", run.id, generation, next.size());
}

}  // namespace evo
