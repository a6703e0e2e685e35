#include "lease_scheduler.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "device_floors.h"
#include "errors.h"
#include "resident_time.h"
#include "run_views.h"
#include "server_config.h"
#include "wire_labels.h"
#include "family.h"
#include "template_registry.h"

namespace evo {

namespace {

using Code = CoordinatorError::Code;

// The time an evaluation held the GPU: its correctness, sanitizer and timing gates.
double gpu_gates_ms(const v1::Evaluation& e) {
  double ms = 0;
  for (const auto& g : e.gates()) {
    const v1::Gate kind = gate_of(g);
    if (kind == v1::GATE_CORRECT || kind == v1::GATE_SANITIZER || kind == v1::GATE_TIMED) ms += g.elapsed_ms();
  }
  return ms;
}

}  // namespace

// ---------------------------------------------------------------- turns

std::vector<RunRecord> RunTurns::in_turn(std::vector<RunRecord> runs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto last = std::find_if(runs.begin(), runs.end(), [&](const RunRecord& r) { return r.id == last_leased_run_; });
  if (last != runs.end()) std::rotate(runs.begin(), std::next(last), runs.end());
  return runs;
}

void RunTurns::leased(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_leased_run_ = run_id;
}

// ---------------------------------------------------------------- leases

LeaseScheduler::LeaseScheduler(Store& store, WorkerRegistry& workers, RunLifecycle& runs, int lease_ttl_ms,
                               Clock clock)
    : store_(store),
      workers_(workers),
      runs_(runs),
      admission_(store, workers),
      lease_ttl_ms_(lease_ttl_ms),
      clock_(std::move(clock)) {
  if (lease_ttl_ms_ <= 0) throw InputError("lease TTL must be positive");
}

struct LeaseScheduler::Request {
  WorkerRecord worker;
  int64_t now = 0;
  int want = 1;
  bool changed = false;         // a lease granted or returned, or a candidate answered from the cache
  v1::LeaseResponse response;
  std::vector<std::string> logs;  // written once the transaction committed

  const std::string& device_class() const { return worker.device.device_class(); }
  bool full() const { return response.leases_size() >= want; }
};

v1::LeaseResponse LeaseScheduler::lease(const v1::LeaseRequest& req, const std::function<bool()>& caller_waits,
                                        bool* changed) {
  Request r;
  r.want = std::clamp(req.max_candidates() <= 0 ? 1 : req.max_candidates(), 1, server::kMaxLeasesPerRequest);
  store_.transaction([&] {
    r.worker = workers_.authenticate(req.worker_id(), req.credential());
    r.now = clock_();
    workers_.touch(r.worker.id, r.now);
    if (req.names_held_leases()) return_unreceived(r, req);
    const std::vector<RunRecord> active = store_.active_runs();
    r.want = std::min(r.want, fair_share_left(r));
    for (const auto& run : turns_.in_turn(active)) {
      if (r.full()) break;
      if (!run.device_class.empty() && run.device_class != r.device_class()) continue;
      lease_from_run(r, run.id);
    }
    // Leases nobody would receive are not granted: the transaction rolls back.
    if (r.response.leases_size() > 0 && caller_waits && !caller_waits())
      throw CallerGone("the caller gave up before its " + std::to_string(r.response.leases_size()) +
                       " lease(s) were granted; none was");
  });
  for (const auto& line : r.logs) spdlog::info("{}", line);
  if (changed) *changed = r.changed || r.response.leases_size() > 0;
  if (r.response.leases_size() == 0) r.response.set_retry_after_ms(std::clamp(lease_ttl_ms_ / 10, 50, 1000));
  return r.response;
}

void LeaseScheduler::return_unreceived(Request& r, const v1::LeaseRequest& req) {
  const std::set<std::string> held(req.held_lease_ids().begin(), req.held_lease_ids().end());
  for (const auto& l : store_.active_leases_of(r.worker.id)) {
    if (held.count(l.id)) continue;
    store_.set_lease_outcome(l.id, LeaseOutcome::kReturned);
    store_.set_lease_deadline(l.id, r.now);  // when it was given back
    auto c = store_.get_candidate(l.candidate_id);
    if (c && c->lease_id == l.id && c->state == v1::CANDIDATE_STATE_LEASED) store_.requeue_candidate(c->id, false);
    r.changed = true;
    r.logs.push_back(fmt::format("event=lease_unreceived run_id={} candidate_id={} lease_id={} worker_id={} "
                                 "returned=uncharged",
                                 c ? c->run_id : "", l.candidate_id, l.id, r.worker.id));
  }
}

int LeaseScheduler::fair_share_left(const Request& r) {
  const int open = store_.count_open_candidates_for_class(r.device_class());
  const int live = std::max(1, workers_.live_workers_of_class(r.device_class(), r.now));
  const int held = static_cast<int>(store_.active_leases_of(r.worker.id).size());
  return std::max(0, (open + live - 1) / live - held);
}

// Cache hits can complete a generation and breed the next one mid-request: the run's queue is
// read again until it holds nothing more to hand out.
void LeaseScheduler::lease_from_run(Request& r, const std::string& run_id) {
  for (bool answered_from_cache = true; answered_from_cache && !r.full();) {
    auto run = store_.get_run(run_id);
    if (!run || is_terminal(run->state)) return;
    answered_from_cache = lease_from_queue(r, *run);
  }
}

// One pass over the run's queue as it stands; true when the cache answered a candidate.
bool LeaseScheduler::lease_from_queue(Request& r, RunRecord& run) {
  bool answered_from_cache = false;
  for (const auto& c : store_.queued_candidates(run.id, r.want + server::kQueuedReadAhead)) {
    if (r.full()) break;
    if (run.device_class.empty()) {
      runs_.fix_device_class(run, r.device_class());
      r.logs.push_back(fmt::format("event=run_device_class run_id={} device_class=\"{}\"", run.id, run.device_class));
    }
    if (!c.confirmation && try_cache(run, c, r.worker.device)) {
      answered_from_cache = r.changed = true;
      continue;
    }
    // A confirmation goes to another worker of the class than the one(s) that measured it, when
    // one is live (result_admission.h).
    switch (admission_.placement(c, r.worker, r.now)) {
      case ResultAdmission::Placement::kLease:
        grant(r, run, c);
        break;
      case ResultAdmission::Placement::kLeaveForAnother:
        break;
      case ResultAdmission::Placement::kSettle:
        admission_.settle_disputed(run, c);
        settle_generation(run.id);
        answered_from_cache = true;  // the queue changed: read it again
        break;
    }
  }
  return answered_from_cache;
}

void LeaseScheduler::grant(Request& r, RunRecord& run, const CandidateRecord& c) {
  LeaseRecord l;
  l.id = ids_.next("l-");
  l.candidate_id = c.id;
  l.worker_id = r.worker.id;
  l.issued_ms = r.now;
  l.deadline_ms = r.now + lease_ttl_ms_;
  l.confirmation = c.confirmation;
  store_.insert_lease(l);
  store_.set_candidate_leased(c.id, l.id, r.worker.id, l.deadline_ms);
  runs_.mark_running(run);
  turns_.leased(run.id);
  v1::Lease* out = r.response.add_leases();
  out->set_lease_id(l.id);
  out->set_run_id(run.id);
  out->set_candidate_id(c.id);
  put_genome(c.genome, out->mutable_genome(), out->mutable_typed_genome());
  set_problems(shapes_of(run), out->mutable_problems(), out->mutable_shapes());
  out->set_deadline_unix_ms(l.deadline_ms);
  out->set_confirmation(c.confirmation);
  r.logs.push_back(fmt::format("event=leased run_id={} candidate_id={} lease_id={} worker_id={} confirmation={} "
                               "attempt={}",
                               run.id, c.id, l.id, r.worker.id, c.confirmation, c.attempts + 1));
}

bool LeaseScheduler::try_cache(const RunRecord& run, const CandidateRecord& c, const v1::DeviceInfo& device) {
  // The cache holds only times two workers agreed on (result_admission.h).
  auto hit = store_.cache_get(c.genome_hash, cache_problem_key(run), run.device_class,
                              cache_measurement_key(device, run));
  if (!hit || !hit->confirmed || !hit->fitness_us) return false;
  auto source = store_.get_evaluation(hit->evaluation_id);
  if (!source) return false;
  EvaluationRecord copy;
  copy.candidate_id = c.id;
  copy.worker_id = source->worker_id;
  copy.created_ms = clock_();
  copy.evaluation = source->evaluation;
  copy.evaluation.set_cache_hit(true);
  int64_t eval_id = store_.insert_evaluation(copy);
  spdlog::info("event=cache_hit run_id={} candidate_id={} genome={} source_evaluation={}", run.id, c.id, c.genome,
               hit->evaluation_id);
  store_.finish_candidate(c.id, eval_id, copy.evaluation.status(), hit->fitness_us, hit->spread_pct, true,
                          v1::RESULT_SOURCE_CACHE);
  settle_generation(run.id);
  return true;
}

v1::HeartbeatResponse LeaseScheduler::heartbeat(const v1::HeartbeatRequest& req) {
  v1::HeartbeatResponse resp;
  store_.transaction([&] {
    workers_.authenticate(req.worker_id(), req.credential());
    int64_t now = clock_();
    workers_.touch(req.worker_id(), now);
    for (const auto& id : req.lease_ids()) {
      auto lease = store_.get_lease(id);
      std::optional<CandidateRecord> c;
      if (lease) c = store_.get_candidate(lease->candidate_id);
      bool held = lease && lease->worker_id == req.worker_id() && lease->outcome == LeaseOutcome::kActive &&
                  c && c->lease_id == id;
      if (held)
        store_.set_lease_deadline(id, now + lease_ttl_ms_);
      else
        resp.add_expired_lease_ids(id);
    }
  });
  return resp;
}

int LeaseScheduler::sweep_period_ms() const { return std::clamp(lease_ttl_ms_ / 4, 20, 1000); }

int LeaseScheduler::resume_leases_after_restart() {
  int active = 0;
  int64_t down_ms = 0;
  const int64_t now = clock_();
  store_.transaction([&] {
    // A database from before evod recorded its ticks: the downtime is unknown, the TTL and the
    // grace still count from now.
    if (auto last = store_.last_liveness_tick()) down_ms = std::max<int64_t>(0, now - *last);
    active = store_.shift_active_leases(down_ms + server::kReconnectGraceMs, now + lease_ttl_ms_);
    store_.record_liveness_tick(now);
  });
  if (active)
    spdlog::info("event=leases_resumed active={} down_ms={} extended_by_ms={}", active, down_ms,
                 down_ms + server::kReconnectGraceMs);
  return active;
}

void LeaseScheduler::observe_liveness(int64_t now) {
  const auto last = store_.last_liveness_tick();
  store_.record_liveness_tick(now);
  if (!last) return;
  const int64_t gap = now - *last;
  if (gap <= sweep_period_ms() + server::kStallSlackMs) return;
  // evod did not tick for longer than its period: stopped or stalled. No worker could heartbeat
  // meanwhile, so no lease is charged for it; the heartbeats queued meanwhile land within a TTL.
  const int active = store_.shift_active_leases(gap + lease_ttl_ms_, 0);
  spdlog::warn("event=liveness_gap gap_ms={} active_leases={} extended_by_ms={}", gap, active, gap + lease_ttl_ms_);
}

int LeaseScheduler::sweep_expired_leases() {
  int expired = 0;
  store_.transaction([&] {
    const int64_t now = clock_();
    observe_liveness(now);
    for (const auto& l : store_.expired_leases(now)) {
      ++expired;
      expire(l);
    }
  });
  return expired;
}

void LeaseScheduler::expire(const LeaseRecord& l) {
  store_.set_lease_outcome(l.id, LeaseOutcome::kExpired);
  auto c = store_.get_candidate(l.candidate_id);
  if (!c || c->lease_id != l.id) return;
  if (c->attempts + 1 < server::kMaxLeaseAttempts) {
    store_.requeue_candidate(c->id, true);
    spdlog::warn("event=lease_expired run_id={} candidate_id={} lease_id={} worker_id={} attempts={}", c->run_id,
                 c->id, l.id, l.worker_id, c->attempts + 1);
    return;
  }
  auto run = require_run(store_, c->run_id);
  EvaluationRecord rec;
  rec.candidate_id = c->id;
  rec.worker_id = l.worker_id;
  rec.created_ms = clock_();
  rec.evaluation.set_status(v1::CRASH);
  rec.evaluation.set_message("lease expired " + std::to_string(c->attempts + 1) + " times without a report");
  if (auto w = workers_.find(l.worker_id)) *rec.evaluation.mutable_device() = w->device;
  int64_t eval_id = store_.insert_evaluation(rec);
  store_.finish_candidate(c->id, eval_id, v1::CRASH, std::nullopt, 0, false, v1::RESULT_SOURCE_MEASURED);
  spdlog::warn("event=candidate_abandoned run_id={} candidate_id={} attempts={}", c->run_id, c->id,
               c->attempts + 1);
  if (!is_terminal(run.state)) settle_generation(run.id);
}

// ---------------------------------------------------------------- reports

v1::ReportResponse LeaseScheduler::report(const v1::ReportRequest& req) {
  v1::ReportResponse resp;
  store_.transaction([&] {
    const WorkerRecord worker = workers_.authenticate(req.worker_id(), req.credential());
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
    const CandidateRecord c = *store_.get_candidate(lease->candidate_id);
    if (c.lease_id != lease->id)
      throw CoordinatorError(Code::kFailedPrecondition,
                             "lease '" + lease->id + "' expired and its candidate was handed out again");
    const RunRecord run = require_run(store_, c.run_id);
    EvaluationRecord rec = checked_evaluation(req, worker, *lease, c, run);
    const v1::Evaluation& e = rec.evaluation;
    const int64_t eval_id = rec.id = store_.insert_evaluation(rec);
    store_.add_run_gpu_ms(run.id, gpu_gates_ms(e));
    store_.set_lease_outcome(lease->id, LeaseOutcome::kReported);
    workers_.touch(worker.id, rec.created_ms);
    resp.set_accepted(true);
    spdlog::info("event=reported run_id={} candidate_id={} lease_id={} worker_id={} status={} fitness_us={:.3f} "
                 "confirmation={}",
                 run.id, c.id, lease->id, worker.id, v1::EvalStatus_Name(e.status()), e.fitness_us(),
                 c.confirmation);
    if (is_terminal(run.state)) {
      // A cancelled run keeps what was measured but breeds nothing more.
      const bool ok = e.status() == v1::OK;
      store_.finish_candidate(c.id, eval_id, e.status(),
                              ok ? std::optional<double>(ranked_fitness_us(run.fitness_inputs, e)) : std::nullopt,
                              0, false, v1::RESULT_SOURCE_MEASURED);
      return;
    }
    apply_result(run, c, rec);
  });
  return resp;
}

// The reported evaluation, checked against the run it is for (kInvalidArgument), as it is stored.
EvaluationRecord LeaseScheduler::checked_evaluation(const v1::ReportRequest& req, const WorkerRecord& worker,
                                                    const LeaseRecord& lease, const CandidateRecord& c,
                                                    const RunRecord& run) {
  v1::Evaluation e = req.evaluation();
  const std::string on = "report on lease '" + lease.id + "': ";
  // What was measured on, and whether it was estimated, is what the worker registered.
  if (!e.device().device_class().empty() && e.device().device_class() != worker.device.device_class())
    throw CoordinatorError(Code::kInvalidArgument, on + "device class '" + e.device().device_class() +
                                                       "' is not the one worker '" + worker.id + "' registered ('" +
                                                       worker.device.device_class() + "')");
  *e.mutable_device() = worker.device;
  e.mutable_device()->clear_template_fingerprints();
  e.set_estimated(estimates(worker));
  if (e.status() == v1::EVAL_STATUS_UNSPECIFIED)
    throw CoordinatorError(Code::kInvalidArgument, on + "evaluation has no status");
  if (e.status() == v1::OK && !(std::isfinite(e.fitness_us()) && e.fitness_us() > 0))
    throw CoordinatorError(Code::kInvalidArgument, on + "status OK needs a positive fitness_us");
  // What the run ranks this evaluation by (the worker's fitness, or its resident mean).
  if (e.status() == v1::OK && !(ranked_fitness_us(run.fitness_inputs, e) > 0))
    throw CoordinatorError(Code::kInvalidArgument,
                           on + "run " + run.id +
                               " ranks by L2-resident inputs, and the evaluation has no resident_us for "
                               "every shape (a worker built before that figure?)");
  if (e.device().device_class() != run.device_class)
    throw CoordinatorError(Code::kInvalidArgument, on + "device class '" + e.device().device_class() +
                                                       "' does not match the run's '" + run.device_class + "'");
  if (const std::string why = implausible_time(e, run, worker.device); !why.empty())
    throw CoordinatorError(Code::kInvalidArgument, on + "implausible: " + why);
  EvaluationRecord rec;
  rec.candidate_id = c.id;
  rec.lease_id = lease.id;
  rec.worker_id = worker.id;
  rec.is_confirmation = c.confirmation;
  rec.created_ms = clock_();
  rec.evaluation = std::move(e);
  return rec;
}

bool LeaseScheduler::would_enter_elites(const RunRecord& run, double fitness_us) {
  auto elites = store_.elite_candidates(run.id, run.top_k);
  return static_cast<int>(elites.size()) < run.top_k || fitness_us < *elites.back().fitness_us;
}

void LeaseScheduler::apply_result(const RunRecord& run, const CandidateRecord& c, const EvaluationRecord& rec) {
  if (c.confirmation) {
    admission_.confirming_measurement(run, c, rec, rec.created_ms);
  } else {
    const bool ok = rec.evaluation.status() == v1::OK;
    admission_.first_measurement(
        run, c, rec, ok && would_enter_elites(run, ranked_fitness_us(run.fitness_inputs, rec.evaluation)));
  }
  settle_generation(run.id);
}

void LeaseScheduler::settle_generation(const std::string& run_id) {
  admission_.rank_generation(require_run(store_, run_id));
  runs_.advance_if_generation_complete(run_id);
}

}  // namespace evo
