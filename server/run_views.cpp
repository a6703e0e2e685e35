#include "run_views.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "errors.h"
#include "genome_proto.h"
#include "run_lifecycle.h"
#include "family.h"
#include "search_space.h"
#include "wire_labels.h"

namespace evo {

namespace {

// "crossover(run-0001-c0003, run-0001-c0007)": the operator and its parents' candidate ids.
std::string lineage(const CandidateRecord& c, const std::map<std::string, std::string>& id_of_genome) {
  std::string out = c.op + "(";
  size_t start = 0;
  bool first = true;
  while (start < c.parents.size()) {
    size_t end = c.parents.find(';', start);
    if (end == std::string::npos) end = c.parents.size();
    std::string genome = c.parents.substr(start, end - start);
    auto it = id_of_genome.find(genome);
    out += (first ? "" : ", ") + (it != id_of_genome.end() ? it->second : genome);
    first = false;
    start = end + 1;
  }
  return out + ")";
}

// Done without a fitness: one of the gates refused it.
bool refused_by_a_gate(const CandidateRecord& c) { return c.state == v1::CANDIDATE_STATE_DONE && !c.fitness_us; }

}  // namespace

std::vector<CandidateRecord> elites_of(const std::vector<CandidateRecord>& candidates, int k) {
  std::vector<CandidateRecord> out;
  for (const auto& c : candidates)
    if (c.state == v1::CANDIDATE_STATE_DONE && c.elite_eligible && c.fitness_us) out.push_back(c);
  std::sort(out.begin(), out.end(), [](const CandidateRecord& a, const CandidateRecord& b) {
    if (*a.fitness_us != *b.fitness_us) return *a.fitness_us < *b.fitness_us;
    return a.genome < b.genome;
  });
  if (static_cast<int>(out.size()) > k) out.resize(static_cast<size_t>(k));
  return out;
}

void put_genome(const std::string& stored, std::string* text, v1::Genome* typed) {
  *text = stored;
  try {
    *typed = genome_proto_of_text(stored);
  } catch (const InputError&) {
    typed->Clear();
  }
}

v1::Run to_proto(const RunRecord& r) {
  v1::Run run;
  run.set_run_id(r.id);
  run.set_seed(r.seed);
  set_problems(shapes_of(r), run.mutable_problems(), run.mutable_shapes());
  run.set_generations(r.generations);
  run.set_population(r.population);
  run.set_top_k(r.top_k);
  run.set_search_strategy(r.strategy);
  run.set_strategy(label(r.strategy));  // for an older evoctl, as the other labels below
  run.set_rng_seed(r.rng_seed);
  run.set_device_class(r.device_class);
  run.set_state(static_cast<v1::RunState>(r.state));
  run.set_created_unix_ms(r.created_ms);
  run.set_message(r.message);
  for (const auto& g : r.start_genomes) put_genome(g, run.add_start_genomes(), run.add_typed_start_genomes());
  run.set_fitness_from(r.fitness_inputs);
  run.set_fitness_inputs(label(r.fitness_inputs));
  run.set_budget_ms(r.budget_ms);
  run.set_max_evals(r.max_evals);
  run.set_patience(r.patience);
  run.set_target_us(r.target_us);
  run.set_stop_reason(r.stop_reason);
  run.set_started_unix_ms(r.started_ms);
  run.set_ended_unix_ms(r.ended_ms);
  return run;
}

RunViews::RunViews(Store& store, WorkerRegistry& workers, Clock clock)
    : store_(store), workers_(workers), clock_(std::move(clock)) {}

v1::RunStatus RunViews::build_status(const RunRecord& run) {
  v1::RunStatus st;
  *st.mutable_run() = to_proto(run);
  st.set_generation(run.current_generation);
  // Counts and the best elite, read by index: a status costs the same at 25 candidates as at 25k.
  const CandidateCounts counts = store_.count_candidates_of_run(run.id);
  const int done = counts.done;
  st.set_evaluations_done(done);
  int planned = run.generations * run.population;
  if (run.max_evals > 0) planned = std::min(planned, run.max_evals);
  // A finished run (or an exhausted space) planned exactly what it did.
  st.set_evaluations_total(run.state == v1::DONE ? done : std::max(planned, counts.total));
  st.set_failed(counts.refused);
  auto elites = store_.elite_candidates(run.id, 1);
  if (!elites.empty()) {
    st.set_best_us(*elites[0].fitness_us);
    put_genome(elites[0].genome, st.mutable_best_genome(), st.mutable_typed_best_genome());
    st.set_best_self_confirmed(elites[0].self_confirmed);
  }
  st.set_estimated(run.device_class.find("/estimated") != std::string::npos);
  const int64_t now = clock_();
  int64_t elapsed = std::max<int64_t>(0, now - run.created_ms);
  st.set_elapsed_ms(elapsed);
  if (done > 0 && st.evaluations_total() > done)
    st.set_eta_ms(static_cast<int64_t>(double(elapsed) / done * (st.evaluations_total() - done)));
  if (run.started_ms > 0) {
    const int64_t wall_ms = std::max<int64_t>(1, (run.ended_ms > 0 ? run.ended_ms : now) - run.started_ms);
    st.set_evaluations_per_minute(done * 60'000.0 / double(wall_ms));
    st.set_gpu_share(run.gpu_ms / double(wall_ms));
  }
  // A run no worker can serve waits without end; people should see that, not a still clock.
  if (run.state == v1::QUEUED || run.state == v1::RUNNING) st.set_live_workers(workers_.live_workers_for(run, now));
  return st;
}

v1::RunStatus RunViews::status(const std::string& run_id) {
  v1::RunStatus st;
  store_.transaction([&] { st = build_status(require_run(store_, run_id)); });
  return st;
}

v1::ListRunsResponse RunViews::list_runs() {
  v1::ListRunsResponse resp;
  store_.transaction([&] {
    for (const auto& r : store_.list_runs()) *resp.add_runs() = build_status(r);
  });
  return resp;
}

v1::LeaderboardResponse RunViews::leaderboard(const v1::LeaderboardRequest& req) {
  if (req.top() < 0) throw CoordinatorError(CoordinatorError::Code::kInvalidArgument, "top must be positive");
  v1::LeaderboardResponse resp;
  store_.transaction([&] {
    std::string run_id = req.run_id();
    if (run_id.empty()) {
      auto newest = store_.newest_run_id();
      if (!newest) throw CoordinatorError(CoordinatorError::Code::kNotFound, "no runs yet");
      run_id = *newest;
    }
    RunRecord run = require_run(store_, run_id);
    *resp.mutable_run() = to_proto(run);
    auto candidates = store_.candidates_of_run(run.id);
    std::map<std::string, std::string> id_of_genome;
    for (const auto& c : candidates) id_of_genome[c.genome] = c.id;

    // The seed genome (the space's default) is always in generation 0: the baseline for speedups.
    const Genome seed_genome = SearchSpace::for_template(run.seed).default_genome();
    double seed_us = 0;
    for (const auto& c : candidates)
      if (c.genome == seed_genome.text() && c.state == v1::CANDIDATE_STATE_DONE && c.fitness_us)
        seed_us = *c.fitness_us;
    resp.set_seed_us(seed_us);
    resp.set_seed_genome(seed_genome.text());
    *resp.mutable_typed_seed_genome() = genome_to_proto(seed_genome);

    int top = req.top() == 0 ? 10 : req.top();
    auto elites = elites_of(candidates, std::min(top, run.top_k));
    int rank = 0;
    for (const auto& c : elites) {
      v1::Elite* e = resp.add_elites();
      e->set_rank(++rank);
      e->set_candidate_id(c.id);
      put_genome(c.genome, e->mutable_genome(), e->mutable_typed_genome());
      e->set_fitness_us(*c.fitness_us);
      e->set_spread_pct(c.spread_pct);
      e->set_speedup_vs_seed(seed_us > 0 ? seed_us / *c.fitness_us : 0);
      e->set_parents(lineage(c, id_of_genome));
      e->set_generation(c.generation);
      e->set_self_confirmed(c.self_confirmed);
      if (c.final_evaluation_id) {
        if (auto ev = store_.get_evaluation(*c.final_evaluation_id)) {
          *e->mutable_evaluation() = ev->evaluation;
          e->set_estimated(ev->evaluation.estimated());
          // Per-shape TFLOP/s, rescaled from that measurement's time to the elite's fitness (the
          // mean of two measurements; for a resident run, of the resident times).
          double sum = 0;
          for (const auto& s : ev->evaluation.shapes()) sum += s.tflops();
          if (ev->evaluation.shapes_size() > 0 && ev->evaluation.fitness_us() > 0)
            e->set_tflops(sum / ev->evaluation.shapes_size() * ev->evaluation.fitness_us() / *c.fitness_us);
        }
      }
    }
  });
  return resp;
}

v1::ListCandidatesResponse RunViews::list_candidates(const v1::ListCandidatesRequest& req) {
  constexpr int kDefaultLimit = 50;
  const size_t limit = static_cast<size_t>(req.limit() > 0 ? req.limit() : kDefaultLimit);
  v1::ListCandidatesResponse resp;
  store_.transaction([&] {
    const RunRecord run = require_run(store_, req.run_id());
    *resp.mutable_run() = to_proto(run);
    const Genome seed_genome = SearchSpace::for_template(run.seed).default_genome();
    resp.set_seed_genome(seed_genome.text());
    *resp.mutable_typed_seed_genome() = genome_to_proto(seed_genome);
    const auto candidates = store_.candidates_of_run(run.id);
    std::map<std::string, std::string> id_of_genome;
    for (const auto& c : candidates) id_of_genome[c.genome] = c.id;
    std::vector<const CandidateRecord*> matched;
    for (const auto& c : candidates)
      if (!req.failed_only() || refused_by_a_gate(c)) matched.push_back(&c);
    resp.set_matched(static_cast<int32_t>(matched.size()));
    // The latest proposed, listed in the order proposed.
    for (size_t i = matched.size() > limit ? matched.size() - limit : 0; i < matched.size(); ++i) {
      const CandidateRecord& c = *matched[i];
      v1::CandidateSummary* out = resp.add_candidates();
      out->set_candidate_id(c.id);
      out->set_generation(c.generation);
      put_genome(c.genome, out->mutable_genome(), out->mutable_typed_genome());
      out->set_parents(lineage(c, id_of_genome));
      out->set_phase(c.state);
      out->set_state(label(c.state));
      out->set_fitness_us(c.fitness_us.value_or(0));
      out->set_failed(refused_by_a_gate(c));
      out->set_elite_eligible(c.elite_eligible);
      out->set_result_from(c.result_source);
      out->set_result_source(label(c.result_source));
      if (c.final_evaluation_id) {
        if (auto ev = store_.get_evaluation(*c.final_evaluation_id)) {
          out->set_done_unix_ms(ev->created_ms);
          *out->mutable_evaluation() = std::move(ev->evaluation);
          out->mutable_evaluation()->mutable_resources()->clear_ptxas_log();  // kilobytes each
        }
      }
    }
  });
  return resp;
}

RunBest RunViews::best_of(const std::string& run_id) {
  RunBest best;
  store_.transaction([&] {
    best.run = require_run(store_, run_id);
    auto elites = store_.elite_candidates(run_id, 1);
    if (elites.empty())
      throw CoordinatorError(CoordinatorError::Code::kFailedPrecondition,
                             "run '" + run_id + "' has no confirmed elite" +
                                 (best.run.state == v1::QUEUED || best.run.state == v1::RUNNING ? " yet" : ""));
    best.candidate = elites[0];
    best.evaluation = *store_.get_evaluation(*elites[0].final_evaluation_id);
  });
  return best;
}

}  // namespace evo
