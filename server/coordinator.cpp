#include "coordinator.h"

#include "shape_proto.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "resident_time.h"
#include "search_space.h"
#include "shape.h"
#include "strategy.h"
#include "template_registry.h"

namespace evo {

namespace {

using Code = CoordinatorError::Code;

bool is_terminal(int state) {
  return state == v1::DONE || state == v1::CANCELLED || state == v1::FAILED;
}

// Failures worth remembering across runs: the same genome fails the same way again. Timeouts and
// crashes may be a sick worker's fault, so they are measured again next time.
bool cacheable(v1::EvalStatus status) {
  return status != v1::TIMEOUT && status != v1::CRASH && status != v1::EVAL_STATUS_UNSPECIFIED;
}

std::string join_parents(const std::vector<std::string>& parents) {
  std::string out;
  for (size_t i = 0; i < parents.size(); ++i) out += (i ? ";" : "") + parents[i];
  return out;
}

std::vector<ProblemShape> shapes_of(const RunRecord& run) {
  std::vector<ProblemShape> out;
  for (const auto& s : run.shapes) out.push_back(parse_shape(s));
  return out;
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
  return make_strategy(run.strategy, ctx);
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
  for (const auto& text : req.start_genomes()) {
    const std::string named = "start genome '" + text + "'";
    Genome g;
    try {
      g = space.canonical(space.parse(text), shapes);
    } catch (const InputError& e) {
      throw InputError(named + ": " + e.what());
    }
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
  if (!out.empty() && needed > run.population) {
    const bool seed_among = needed == static_cast<int>(out.size());
    throw InputError(std::to_string(out.size()) + " distinct start genomes" +
                     (seed_among ? " (the default genome among them)" : " and the default genome") +
                     " need a population of " + std::to_string(needed) + ", got " +
                     std::to_string(run.population));
  }
  return out;
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

Coordinator::Coordinator(Store& store, CoordinatorOptions options)
    : store_(store), options_(std::move(options)), rng_(std::random_device{}()) {
  if (options_.lease_ttl_ms <= 0) throw InputError("lease TTL must be positive");
}

std::string Coordinator::random_id(const char* prefix) {
  char id[48];
  std::snprintf(id, sizeof id, "%s%016llx", prefix, static_cast<unsigned long long>(rng_()));
  return id;
}

void Coordinator::notify_change() {
  {
    std::lock_guard<std::mutex> lock(change_mutex_);
    ++changes_;
  }
  change_cv_.notify_all();
}

uint64_t Coordinator::change_count() const {
  std::lock_guard<std::mutex> lock(change_mutex_);
  return changes_;
}

void Coordinator::wait_for_change(uint64_t seen, int timeout_ms) {
  std::unique_lock<std::mutex> lock(change_mutex_);
  change_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
}

void Coordinator::wake_all() { notify_change(); }

RunRecord Coordinator::require_run(const std::string& run_id) {
  auto run = store_.get_run(run_id);
  if (!run) throw CoordinatorError(Code::kNotFound, "unknown run '" + run_id + "'");
  return *run;
}

WorkerRecord Coordinator::require_worker(const std::string& worker_id) {
  auto w = store_.get_worker(worker_id);
  if (!w) throw CoordinatorError(Code::kNotFound, "unknown worker '" + worker_id + "': register first");
  return *w;
}

// ---------------------------------------------------------------- submit

v1::Run Coordinator::submit(const v1::SubmitRunRequest& req) {
  // Everything is validated before the transaction opens: bad input writes nothing.
  RunRecord run;
  const SearchSpace* space = nullptr;
  std::vector<Offspring> generation0;
  try {
    if (req.seed().empty()) throw InputError("missing seed (e.g. fa_s512_v3)");
    space = &SearchSpace::for_template(req.seed());
    run.seed = req.seed();
    const DType dtype = dtype_from_proto(req.dtype());
    std::vector<std::string> texts(req.shapes().begin(), req.shapes().end());
    if (texts.empty()) texts.push_back(server::kDefaultShape);
    for (const auto& text : texts) {
      ProblemShape p = parse_shape(text, req.causal(), dtype);
      require_square_if_causal(p, text);
      space->require_serves(p, text);
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
    run.strategy = req.strategy().empty() ? server::kDefaultStrategy : req.strategy();
    run.rng_seed = req.rng_seed() == 0 ? server::kDefaultRngSeed : req.rng_seed();
    run.device_class = req.device_class();
    run.smem_limit = server::kDefaultSmemLimit;
    run.start_genomes = check_start_genomes(req, run, *space);
    run.fitness_inputs = req.fitness_inputs().empty() ? server::kDefaultFitnessInputs : req.fitness_inputs();
    if (run.fitness_inputs != "rotated" && run.fitness_inputs != "resident")
      throw InputError("fitness_inputs must be 'rotated' or 'resident', got '" + run.fitness_inputs + "'");
    run.state = v1::QUEUED;
    run.created_ms = options_.clock();
    // make_strategy rejects an unknown strategy name; generation 0 is computed before any write.
    run.id = "pending";
    generation0 = strategy_for(run, *space)->next_generation(0, {}, run.population);
  } catch (const InputError& e) {
    throw CoordinatorError(Code::kInvalidArgument, e.what());
  }
  if (generation0.empty())
    throw CoordinatorError(Code::kInvalidArgument,
                           "no valid genome of " + run.seed + " serves these shapes");

  store_.transaction([&] {
    run.id = store_.next_run_id();
    store_.insert_run(run);
    insert_generation(store_, run, 0, generation0, 0);
  });
  spdlog::info("event=run_submitted run_id={} seed={} shapes={} generations={} population={} top_k={} "
               "strategy={} rng_seed={} device_class=\"{}\" start_genomes={} fitness_inputs={} candidates={}",
               run.id, run.seed, run.shapes.size(), run.generations, run.population, run.top_k,
               run.strategy, run.rng_seed, run.device_class, run.start_genomes.size(), run.fitness_inputs,
               generation0.size());
  notify_change();
  return to_proto(run);
}

v1::Run Coordinator::cancel(const std::string& run_id) {
  RunRecord run;
  store_.transaction([&] {
    run = require_run(run_id);
    if (!is_terminal(run.state)) {
      store_.set_run_state(run_id, v1::CANCELLED, "cancelled by request");
      run.state = v1::CANCELLED;
      run.message = "cancelled by request";
    }
  });
  spdlog::info("event=run_cancelled run_id={}", run_id);
  notify_change();
  return to_proto(run);
}

// ---------------------------------------------------------------- workers

namespace {
// Why a worker's kernel templates are not evod's, or "" when they are. Each of evod's templates
// must be reported with evod's fingerprint: a worker built from other template code would answer
// for a genome with another kernel's time, and the result cache would keep it.
std::string foreign_templates(const v1::DeviceInfo& device) {
  const auto& reported = device.template_fingerprints();
  for (const auto& id : template_ids()) {
    const std::string ours = template_fingerprint(id);
    const std::string prefix = id + "@";
    auto theirs = std::find_if(reported.begin(), reported.end(),
                               [&](const std::string& f) { return f.rfind(prefix, 0) == 0; });
    if (theirs == reported.end())
      return "the worker reports no fingerprint for template " + id + " (evod has " + ours +
             "); it predates this check or was built without the template: deploy evod and "
             "evo-worker from one build";
    if (*theirs != ours)  // 64 bytes are enough to tell them apart in a one-line error
      return "the worker's template " + theirs->substr(0, 64) + " is not evod's " + ours +
             ": they were built from different kernel code; deploy evod and evo-worker from one "
             "build";
  }
  return "";
}
}  // namespace

v1::RegisterWorkerResponse Coordinator::register_worker(const v1::RegisterWorkerRequest& req) {
  if (req.device().device_class().empty())
    throw CoordinatorError(Code::kInvalidArgument, "register: device.device_class is empty");
  if (const std::string why = foreign_templates(req.device()); !why.empty()) {
    spdlog::warn("event=worker_refused name={} reason=\"{}\"", req.name(), why);
    throw CoordinatorError(Code::kFailedPrecondition, "register: " + why);
  }
  WorkerRecord w;
  w.name = req.name().empty() ? "unnamed" : req.name();
  w.device = req.device();
  w.registered_ms = w.last_seen_ms = options_.clock();
  store_.transaction([&] {
    w.id = random_id("w-");
    store_.upsert_worker(w);
  });
  spdlog::info("event=worker_registered worker_id={} name={} device_class=\"{}\" measurement=\"{}\"", w.id,
               w.name, w.device.device_class(), measurement_key_of(w.device));
  v1::RegisterWorkerResponse resp;
  resp.set_worker_id(w.id);
  resp.set_lease_ttl_ms(options_.lease_ttl_ms);
  resp.set_heartbeat_interval_ms(heartbeat_interval_ms());
  return resp;
}

v1::ListWorkersResponse Coordinator::list_workers(const v1::ListWorkersRequest& req) {
  v1::ListWorkersResponse resp;
  const int64_t now = options_.clock();
  const int64_t live_from = live_since(now);
  resp.set_now_unix_ms(now);
  store_.transaction([&] {
    auto workers = store_.workers_seen_since(req.include_gone() ? 0 : live_from);
    const auto leases = store_.active_lease_counts();  // one query, not one per worker
    std::stable_sort(workers.begin(), workers.end(), [&](const WorkerRecord& a, const WorkerRecord& b) {
      const bool a_live = a.last_seen_ms >= live_from, b_live = b.last_seen_ms >= live_from;
      return a_live != b_live ? a_live : a.name < b.name;
    });
    for (const auto& w : workers) {
      v1::WorkerStatus* out = resp.add_workers();
      out->set_worker_id(w.id);
      out->set_name(w.name);
      out->set_device_class(w.device.device_class());
      out->set_gpu_name(w.device.gpu_name());
      out->set_backend(w.device.backend());
      out->set_registered_unix_ms(w.registered_ms);
      out->set_last_seen_unix_ms(w.last_seen_ms);
      out->set_live(w.last_seen_ms >= live_from);
      const auto held = leases.find(w.id);
      out->set_active_leases(held == leases.end() ? 0 : held->second);
    }
  });
  return resp;
}

int Coordinator::heartbeat_interval_ms() const { return std::max(50, options_.lease_ttl_ms / 3); }

int64_t Coordinator::live_since(int64_t now_ms) const {
  return now_ms - int64_t(server::kLiveWorkerHeartbeats) * heartbeat_interval_ms();
}

v1::HeartbeatResponse Coordinator::heartbeat(const v1::HeartbeatRequest& req) {
  v1::HeartbeatResponse resp;
  store_.transaction([&] {
    require_worker(req.worker_id());
    int64_t now = options_.clock();
    store_.touch_worker(req.worker_id(), now);
    for (const auto& id : req.lease_ids()) {
      auto lease = store_.get_lease(id);
      std::optional<CandidateRecord> c;
      if (lease) c = store_.get_candidate(lease->candidate_id);
      bool held = lease && lease->worker_id == req.worker_id() && lease->outcome == LeaseOutcome::kActive &&
                  c && c->lease_id == id;
      if (held)
        store_.set_lease_deadline(id, now + options_.lease_ttl_ms);
      else
        resp.add_expired_lease_ids(id);
    }
  });
  return resp;
}

namespace {
// What a cached time was measured on: the run's shapes, in the run's order. A genome timed on
// 1x8x512x64 says nothing about 16x16x512x64.
std::string problem_key(const RunRecord& run) {
  std::string key;
  for (const auto& s : run.shapes) key += (key.empty() ? "" : ",") + s;
  return key;
}

// The result cache's measurement part: the worker's NVRTC, CUDA and timing method, and the run's
// kernel template as this build has it, so that a database kept across a change of the
// template's code never answers for a genome whose kernel has changed since.
std::string cache_measurement_key(const v1::DeviceInfo& device, const RunRecord& run) {
  // The cached fitness is the run's (ranked_fitness_us): a resident one never answers for a rotated run.
  return measurement_key_of(device) + " / " + template_fingerprint(run.seed) +
         (run.fitness_inputs == "resident" ? " / fitness: L2-resident inputs" : "");
}

}  // namespace

bool Coordinator::try_cache(const RunRecord& run, const CandidateRecord& c, const v1::DeviceInfo& device) {
  auto hit = store_.cache_get(c.genome_hash, problem_key(run), run.device_class, cache_measurement_key(device, run));
  if (!hit) return false;
  auto source = store_.get_evaluation(hit->evaluation_id);
  if (!source) return false;
  EvaluationRecord copy;
  copy.candidate_id = c.id;
  copy.worker_id = source->worker_id;
  copy.created_ms = options_.clock();
  copy.evaluation = source->evaluation;
  copy.evaluation.set_cache_hit(true);
  int64_t eval_id = store_.insert_evaluation(copy);
  spdlog::info("event=cache_hit run_id={} candidate_id={} genome={} confirmed={} source_evaluation={}", run.id,
               c.id, c.genome, hit->confirmed, hit->evaluation_id);
  if (hit->confirmed || !hit->fitness_us || copy.evaluation.estimated()) {
    // A confirmed (or deterministic, or failed) result needs nothing more.
    store_.finish_candidate(c.id, eval_id, copy.evaluation.status(), hit->fitness_us, hit->spread_pct,
                            hit->fitness_us.has_value(), "cache");
  } else if (would_enter_elites(run, *hit->fitness_us)) {
    store_.await_confirmation(c.id, eval_id, source->worker_id);
    return true;
  } else {
    store_.finish_candidate(c.id, eval_id, copy.evaluation.status(), hit->fitness_us, 0, false, "cache");
  }
  advance_if_generation_complete(run.id);
  return true;
}

v1::LeaseResponse Coordinator::lease(const v1::LeaseRequest& req) {
  v1::LeaseResponse resp;
  int want = std::clamp(req.max_candidates() <= 0 ? 1 : req.max_candidates(), 1, server::kMaxLeasesPerRequest);
  std::vector<std::string> logs;
  store_.transaction([&] {
    WorkerRecord worker = require_worker(req.worker_id());
    int64_t now = options_.clock();
    store_.touch_worker(worker.id, now);
    const std::string& wclass = worker.device.device_class();
    bool another_worker = store_.count_live_workers(wclass, live_since(now), worker.id) > 0;

    std::vector<RunRecord> runs = store_.active_runs();
    {
      std::lock_guard<std::mutex> lock(schedule_mutex_);
      auto last = std::find_if(runs.begin(), runs.end(),
                               [&](const RunRecord& r) { return r.id == last_leased_run_; });
      if (last != runs.end()) std::rotate(runs.begin(), std::next(last), runs.end());
    }
    for (const auto& listed : runs) {
      if (resp.leases_size() >= want) break;
      if (!listed.device_class.empty() && listed.device_class != wclass) continue;
      // Cache hits can breed a new generation mid-loop: re-read the queue until it holds nothing to hand out.
      for (bool again = true; again && resp.leases_size() < want;) {
        again = false;
        auto run = store_.get_run(listed.id);
        if (!run || is_terminal(run->state)) break;
        for (const auto& c : store_.queued_candidates(run->id)) {
          if (resp.leases_size() >= want) break;
          if (run->device_class.empty()) {
            // The first worker that leases fixes the run's class: measured and estimated never mix.
            store_.set_run_device_class(run->id, wclass);
            run->device_class = wclass;
            logs.push_back(fmt::format("event=run_device_class run_id={} device_class=\"{}\"", run->id, wclass));
          }
          if (!c.confirmation && try_cache(*run, c, worker.device)) {
            again = true;
            continue;
          }
          // A confirmation goes preferably to another worker of the class; this one gets it only when
          // no other is around.
          if (c.confirmation && c.first_worker == worker.id && another_worker) continue;
          LeaseRecord l;
          l.id = random_id("l-");
          l.candidate_id = c.id;
          l.worker_id = worker.id;
          l.issued_ms = now;
          l.deadline_ms = now + options_.lease_ttl_ms;
          l.confirmation = c.confirmation;
          store_.insert_lease(l);
          store_.set_candidate_leased(c.id, l.id, worker.id, l.deadline_ms);
          if (run->state == v1::QUEUED) {
            store_.set_run_state(run->id, v1::RUNNING, "");
            run->state = v1::RUNNING;
          }
          v1::Lease* out = resp.add_leases();
          out->set_lease_id(l.id);
          out->set_run_id(run->id);
          {
            std::lock_guard<std::mutex> lock(schedule_mutex_);
            last_leased_run_ = run->id;
          }
          out->set_candidate_id(c.id);
          out->set_genome(c.genome);
          for (const auto& s : shapes_of(*run)) *out->add_shapes() = shape_to_proto(s);
          out->set_deadline_unix_ms(l.deadline_ms);
          out->set_confirmation(c.confirmation);
          logs.push_back(fmt::format("event=leased run_id={} candidate_id={} lease_id={} worker_id={} "
                                     "confirmation={} attempt={}",
                                     run->id, c.id, l.id, worker.id, c.confirmation, c.attempts + 1));
        }
      }
    }
  });
  for (const auto& line : logs) spdlog::info("{}", line);
  if (resp.leases_size() == 0) resp.set_retry_after_ms(std::clamp(options_.lease_ttl_ms / 10, 50, 1000));
  notify_change();
  return resp;
}

// ---------------------------------------------------------------- results

bool Coordinator::would_enter_elites(const RunRecord& run, double fitness_us) {
  auto elites = elites_of(store_.candidates_of_run(run.id), run.top_k);
  return static_cast<int>(elites.size()) < run.top_k || fitness_us < *elites.back().fitness_us;
}

void Coordinator::apply_result(const RunRecord& run, const CandidateRecord& c, int64_t eval_id,
                               const v1::Evaluation& e, const std::string& worker_id) {
  const bool ok = e.status() == v1::OK;
  const std::string toolkit = cache_measurement_key(e.device(), run);
  const double fitness_us = ranked_fitness_us(run.fitness_inputs, e);  // meaningful only when ok
  if (!c.confirmation) {
    if (ok && !e.estimated() && would_enter_elites(run, fitness_us)) {
      // Timing noise must not crown a winner: a would-be elite is measured a second time.
      // (Estimated results come from a deterministic model; measuring twice would agree by
      // construction, so they skip this step and are eligible at once.)
      store_.await_confirmation(c.id, eval_id, worker_id);
      spdlog::info("event=confirmation_queued run_id={} candidate_id={} first_us={:.3f}", run.id, c.id,
                   fitness_us);
      return;
    }
    std::optional<double> fitness;
    if (ok) fitness = fitness_us;
    store_.finish_candidate(c.id, eval_id, e.status(), fitness, 0, ok && e.estimated(), "measured");
    if (cacheable(e.status()))
      store_.cache_put({c.genome_hash, problem_key(run), run.device_class, toolkit, eval_id, fitness, 0, ok && e.estimated()});
    spdlog::info("event=candidate_done run_id={} candidate_id={} status={} fitness_us={}", run.id, c.id,
                 v1::EvalStatus_Name(e.status()), fitness ? fmt::format("{:.3f}", *fitness) : "none");
  } else {
    auto first = c.first_evaluation_id ? store_.get_evaluation(*c.first_evaluation_id) : std::nullopt;
    if (!ok || !first) {
      store_.finish_candidate(c.id, eval_id, e.status(), std::nullopt, 0, false, "measured");
      if (cacheable(e.status()))
        store_.cache_put({c.genome_hash, problem_key(run), run.device_class, toolkit, eval_id, std::nullopt, 0, false});
      spdlog::warn("event=confirmation_failed run_id={} candidate_id={} status={} message=\"{}\"", run.id, c.id,
                   v1::EvalStatus_Name(e.status()), e.message());
    } else {
      double a = ranked_fitness_us(run.fitness_inputs, first->evaluation), b = fitness_us;
      double mean = (a + b) / 2;
      double disagreement = std::abs(a - b) / mean;
      bool agree = disagreement <= server::kConfirmationTolerance;
      store_.finish_candidate(c.id, eval_id, v1::OK, mean, disagreement * 100, agree, "measured");
      store_.cache_put({c.genome_hash, problem_key(run), run.device_class, toolkit, eval_id, mean, disagreement * 100, agree});
      spdlog::info("event=confirmation_done run_id={} candidate_id={} first_us={:.3f} second_us={:.3f} "
                   "spread_pct={:.2f} admitted={}",
                   run.id, c.id, a, b, disagreement * 100, agree);
    }
  }
  advance_if_generation_complete(run.id);
}

void Coordinator::advance_if_generation_complete(const std::string& run_id) {
  RunRecord run = require_run(run_id);
  if (is_terminal(run.state)) return;
  int g = run.current_generation;
  if (store_.count_candidates(run_id, g, true) < store_.count_candidates(run_id, g, false)) return;
  if (g + 1 >= run.generations) {
    store_.set_run_state(run_id, v1::DONE, "");
    spdlog::info("event=run_done run_id={} generations={}", run_id, g + 1);
    return;
  }
  const SearchSpace& space = SearchSpace::for_template(run.seed);
  auto candidates = store_.candidates_of_run(run_id);
  std::vector<ScoredCandidate> history;
  for (const auto& c : candidates) history.push_back({space.parse(c.genome), c.fitness_us});
  std::vector<Offspring> next;
  try {
    next = strategy_for(run, space)->next_generation(g + 1, history, run.population);
  } catch (const std::exception& e) {
    store_.set_run_state(run_id, v1::FAILED, std::string("strategy failed: ") + e.what());
    spdlog::error("event=run_failed run_id={} error=\"{}\"", run_id, e.what());
    return;
  }
  if (next.empty()) {
    store_.set_run_state(run_id, v1::DONE, "search space exhausted");
    spdlog::info("event=run_done run_id={} generations={} reason=exhausted", run_id, g + 1);
    return;
  }
  insert_generation(store_, run, g + 1, next, static_cast<int>(candidates.size()));
  store_.set_run_generation(run_id, g + 1);
  spdlog::info("event=generation_bred run_id={} generation={} candidates={}", run_id, g + 1, next.size());
}

v1::ReportResponse Coordinator::report(const v1::ReportRequest& req) {
  v1::ReportResponse resp;
  store_.transaction([&] {
    WorkerRecord worker = require_worker(req.worker_id());
    auto lease = store_.get_lease(req.lease_id());
    if (!lease) throw CoordinatorError(Code::kNotFound, "unknown lease '" + req.lease_id() + "'");
    if (lease->worker_id != worker.id)
      throw CoordinatorError(Code::kFailedPrecondition,
                             "lease '" + lease->id + "' is not held by worker '" + worker.id + "'");
    if (store_.evaluation_by_lease(lease->id)) {
      resp.set_accepted(true);
      resp.set_duplicate(true);
      return;
    }
    CandidateRecord c = *store_.get_candidate(lease->candidate_id);
    if (c.lease_id != lease->id)
      throw CoordinatorError(Code::kFailedPrecondition,
                             "lease '" + lease->id + "' expired and its candidate was handed out again");
    RunRecord run = require_run(c.run_id);
    v1::Evaluation e = req.evaluation();
    if (e.device().device_class().empty()) *e.mutable_device() = worker.device;
    if (e.status() == v1::EVAL_STATUS_UNSPECIFIED)
      throw CoordinatorError(Code::kInvalidArgument, "report on lease '" + lease->id + "': evaluation has no status");
    if (e.status() == v1::OK && !(std::isfinite(e.fitness_us()) && e.fitness_us() > 0))
      throw CoordinatorError(Code::kInvalidArgument,
                             "report on lease '" + lease->id + "': status OK needs a positive fitness_us");
    // What the run ranks this evaluation by (the worker's fitness, or its resident mean).
    const double ranked_us = ranked_fitness_us(run.fitness_inputs, e);
    if (e.status() == v1::OK && !(ranked_us > 0))
      throw CoordinatorError(Code::kInvalidArgument,
                             "report on lease '" + lease->id + "': run " + run.id +
                                 " ranks by L2-resident inputs, and the evaluation has no resident_us for "
                                 "every shape (a worker built before that figure?)");
    if (e.device().device_class() != run.device_class)
      throw CoordinatorError(Code::kInvalidArgument,
                             "report on lease '" + lease->id + "': device class '" + e.device().device_class() +
                                 "' does not match the run's '" + run.device_class + "'");
    EvaluationRecord rec;
    rec.candidate_id = c.id;
    rec.lease_id = lease->id;
    rec.worker_id = worker.id;
    rec.is_confirmation = c.confirmation;
    rec.created_ms = options_.clock();
    rec.evaluation = e;
    int64_t eval_id = store_.insert_evaluation(rec);
    store_.set_lease_outcome(lease->id, LeaseOutcome::kReported);
    store_.touch_worker(worker.id, rec.created_ms);
    resp.set_accepted(true);
    spdlog::info("event=reported run_id={} candidate_id={} lease_id={} worker_id={} status={} fitness_us={:.3f} "
                 "confirmation={}",
                 run.id, c.id, lease->id, worker.id, v1::EvalStatus_Name(e.status()), e.fitness_us(),
                 c.confirmation);
    if (is_terminal(run.state)) {
      // A cancelled run keeps what was measured but breeds nothing more.
      store_.finish_candidate(c.id, eval_id, e.status(),
                              e.status() == v1::OK ? std::optional<double>(ranked_us) : std::nullopt, 0, false,
                              "measured");
      return;
    }
    apply_result(run, c, eval_id, e, worker.id);
  });
  if (!resp.duplicate()) notify_change();
  return resp;
}

int Coordinator::resume_leases_after_restart() {
  int active = 0;
  const int64_t deadline = options_.clock() + options_.lease_ttl_ms;
  store_.transaction([&] { active = store_.extend_active_leases(deadline); });
  if (active) spdlog::info("event=leases_resumed active={} deadline_ms={}", active, deadline);
  return active;
}

int Coordinator::sweep_expired_leases() {
  int expired = 0;
  store_.transaction([&] {
    for (const auto& l : store_.expired_leases(options_.clock())) {
      ++expired;
      store_.set_lease_outcome(l.id, LeaseOutcome::kExpired);
      auto c = store_.get_candidate(l.candidate_id);
      if (!c || c->lease_id != l.id) continue;
      if (c->attempts + 1 >= server::kMaxLeaseAttempts) {
        auto run = require_run(c->run_id);
        EvaluationRecord rec;
        rec.candidate_id = c->id;
        rec.worker_id = l.worker_id;
        rec.created_ms = options_.clock();
        rec.evaluation.set_status(v1::CRASH);
        rec.evaluation.set_message("lease expired " + std::to_string(c->attempts + 1) +
                                   " times without a report");
        auto w = store_.get_worker(l.worker_id);
        if (w) *rec.evaluation.mutable_device() = w->device;
        int64_t eval_id = store_.insert_evaluation(rec);
        store_.finish_candidate(c->id, eval_id, v1::CRASH, std::nullopt, 0, false, "measured");
        spdlog::warn("event=candidate_abandoned run_id={} candidate_id={} attempts={}", c->run_id, c->id,
                     c->attempts + 1);
        if (!is_terminal(run.state)) advance_if_generation_complete(run.id);
      } else {
        store_.requeue_candidate(c->id, true);
        spdlog::warn("event=lease_expired run_id={} candidate_id={} lease_id={} worker_id={} attempts={}",
                     c->run_id, c->id, l.id, l.worker_id, c->attempts + 1);
      }
    }
  });
  if (expired) notify_change();
  return expired;
}

}  // namespace evo
