#include "result_admission.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "resident_time.h"
#include "server_config.h"
#include "template_registry.h"

namespace evo {

namespace {

// One measurement of a candidate, as its run ranks it.
struct Measurement {
  const EvaluationRecord* record;
  bool ok;
  double us;  // the ranked fitness; meaningful only when ok
};

Measurement measurement(const RunRecord& run, const EvaluationRecord& rec) {
  const bool ok = rec.evaluation.status() == v1::OK;
  return {&rec, ok, ok ? ranked_fitness_us(run.fitness_inputs, rec.evaluation) : 0};
}

// |a - b| over their mean.
double spread(double a, double b) { return std::abs(a - b) / ((a + b) / 2); }

bool agree(const Measurement& a, const Measurement& b) {
  if (a.ok != b.ok) return false;
  return !a.ok || spread(a.us, b.us) <= server::kConfirmationTolerance;
}

std::string text(const Measurement& m) {
  return m.ok ? fmt::format("{:.3f} µs", m.us) : v1::EvalStatus_Name(m.record->evaluation.status());
}

}  // namespace

std::string cache_problem_key(const RunRecord& run) {
  // A genome timed on 1x8x512x64 says nothing about 16x16x512x64.
  std::string key;
  for (const auto& s : run.shapes) key += (key.empty() ? "" : ",") + s;
  return key;
}

std::string cache_measurement_key(const v1::DeviceInfo& device, const RunRecord& run) {
  // The template as this build has it, so that a database kept across a change of the template's
  // code never answers for a genome whose kernel has changed since; the cached fitness is the
  // run's (ranked_fitness_us): a resident one never answers for a rotated run.
  return measurement_key_of(device) + " / " + template_fingerprint(run.seed) +
         (run.fitness_inputs == v1::FITNESS_INPUTS_RESIDENT ? " / fitness: L2-resident inputs" : "");
}

ResultAdmission::ResultAdmission(Store& store, WorkerRegistry& workers) : store_(store), workers_(workers) {}

ResultAdmission::Placement ResultAdmission::placement(const CandidateRecord& c, const WorkerRecord& worker,
                                                      int64_t now_ms) {
  if (!c.confirmation) return Placement::kLease;
  const std::string& device_class = worker.device.device_class();
  if (!c.second_evaluation_id) {
    // The first measurer's party confirms its own result only when no other party of the class
    // is live.
    if (!workers_.same_party(worker.id, c.first_worker)) return Placement::kLease;
    return workers_.another_live_party(device_class, {c.first_worker}, now_ms) ? Placement::kLeaveForAnother
                                                                               : Placement::kLease;
  }
  // A third measurement comes from neither party of the two that disagreed.
  if (!workers_.same_party(worker.id, c.first_worker) && !workers_.same_party(worker.id, c.second_worker))
    return Placement::kLease;
  return workers_.another_live_party(device_class, {c.first_worker, c.second_worker}, now_ms)
             ? Placement::kLeaveForAnother
             : Placement::kSettle;
}

std::vector<double> ResultAdmission::standing_times(const RunRecord& run) {
  std::vector<double> out;
  for (const auto& e : store_.elite_candidates(run.id, run.top_k)) out.push_back(*e.fitness_us);
  for (const auto& c : store_.open_confirmations(run.id)) {
    const auto first = c.first_evaluation_id ? store_.get_evaluation(*c.first_evaluation_id) : std::nullopt;
    if (first) out.push_back(measurement(run, *first).us);
  }
  return out;
}

void ResultAdmission::first_measurement(const RunRecord& run, const CandidateRecord& c, const EvaluationRecord& ev,
                                        bool would_be_elite) {
  const Measurement m = measurement(run, ev);
  if (m.ok && would_be_elite) {
    // Timing noise, or a worker's word alone, must not crown a winner.
    store_.await_ranking(c.id, ev.id, ev.worker_id);
    const std::vector<double> standing = standing_times(run);
    if (std::all_of(standing.begin(), standing.end(), [&](double t) { return m.us < t; })) {
      // The run's best so far is confirmed at once rather than at the generation's end: a run
      // cut short (a cancel, a budget, a suite's deadline) while its generation is still being
      // measured then ends with the best it measured as an elite. A new best comes about ln n
      // times in n results in random order, so this costs a few confirmations a generation that
      // the ranking might have spared, and fewer as the elites get hard to beat.
      store_.release_for_confirmation(c.id);
      spdlog::info("event=confirmation_queued run_id={} candidate_id={} first_us={:.3f} first_worker={} rank=1 "
                   "reason=new_best",
                   run.id, c.id, m.us, ev.worker_id);
      return;
    }
    spdlog::info("event=awaiting_ranking run_id={} candidate_id={} first_us={:.3f} first_worker={}", run.id, c.id,
                 m.us, ev.worker_id);
    return;
  }
  const std::optional<double> fitness = m.ok ? std::optional<double>(m.us) : std::nullopt;
  store_.finish_candidate(c.id, ev.id, ev.evaluation.status(), fitness, 0, false, v1::RESULT_SOURCE_MEASURED);
  spdlog::info("event=candidate_done run_id={} candidate_id={} status={} fitness_us={}", run.id, c.id,
               v1::EvalStatus_Name(ev.evaluation.status()), fitness ? fmt::format("{:.3f}", *fitness) : "none");
}

void ResultAdmission::rank_generation(const RunRecord& run) {
  if (is_terminal(run.state)) return;
  const int g = run.current_generation;
  if (store_.count_first_measurements_pending(run.id, g) > 0) return;
  struct Held {
    CandidateRecord candidate;
    EvaluationRecord first;
    double us;
  };
  std::vector<Held> held;
  for (auto& c : store_.candidates_awaiting_ranking(run.id, g)) {
    auto first = store_.get_evaluation(*c.first_evaluation_id);
    const double us = measurement(run, *first).us;
    held.push_back({std::move(c), std::move(*first), us});
  }
  if (held.empty()) return;
  std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
    return a.us != b.us ? a.us < b.us : a.candidate.genome < b.candidate.genome;
  });
  const std::vector<double> standing = standing_times(run);
  for (size_t i = 0; i < held.size(); ++i) {
    const Held& h = held[i];
    // Its place among the elites, the confirmations under way and the faster of its generation.
    const auto faster = std::count_if(standing.begin(), standing.end(), [&](double t) { return t < h.us; });
    const int64_t rank = static_cast<int64_t>(i) + faster;
    if (rank < run.top_k) {
      store_.release_for_confirmation(h.candidate.id);
      spdlog::info("event=confirmation_queued run_id={} candidate_id={} first_us={:.3f} first_worker={} rank={}",
                   run.id, h.candidate.id, h.us, h.first.worker_id, rank + 1);
    } else {
      store_.finish_candidate(h.candidate.id, h.first.id, v1::OK, h.us, 0, false, v1::RESULT_SOURCE_MEASURED);
      spdlog::info("event=candidate_done run_id={} candidate_id={} status=OK fitness_us={:.3f} reason=outranked "
                   "rank={}",
                   run.id, h.candidate.id, h.us, rank + 1);
    }
  }
}

void ResultAdmission::confirming_measurement(const RunRecord& run, const CandidateRecord& c,
                                             const EvaluationRecord& ev, int64_t now_ms) {
  const auto first = c.first_evaluation_id ? store_.get_evaluation(*c.first_evaluation_id) : std::nullopt;
  if (!first) {  // nothing to confirm: the result stands alone, out of the elites
    first_measurement(run, c, ev, false);
    return;
  }
  const Measurement m1 = measurement(run, *first), latest = measurement(run, ev);
  if (!c.second_evaluation_id) {
    if (agree(m1, latest)) return admit(run, c, *first, ev, ev.id);
    spdlog::warn("event=confirmation_disagreed run_id={} candidate_id={} first=\"{}\" first_worker={} second=\"{}\" "
                 "second_worker={}",
                 run.id, c.id, text(m1), first->worker_id, text(latest), ev.worker_id);
    if (!workers_.another_live_party(run.device_class, {first->worker_id, ev.worker_id}, now_ms))
      return settle(run, c, {&*first, &ev}, ev.id);
    store_.await_third_measurement(c.id, ev.id, ev.worker_id);
    spdlog::info("event=third_measurement_queued run_id={} candidate_id={}", run.id, c.id);
    return;
  }
  const auto second = store_.get_evaluation(*c.second_evaluation_id);
  const Measurement m2 = measurement(run, *second);
  const bool with_first = agree(m1, latest), with_second = agree(m2, latest);
  const std::string why = fmt::format("candidate {} of {}: {} against {} and {}", c.id, run.id, text(m1),
                                      text(m2), text(latest));
  if (with_first && (!with_second || spread(m1.us, latest.us) <= spread(m2.us, latest.us))) {
    if (!with_second) count_verdict(second->worker_id, false, why);
    return admit(run, c, *first, ev, ev.id);
  }
  if (with_second) {
    if (!with_first) count_verdict(first->worker_id, false, why);
    if (m2.ok) return admit(run, c, *second, ev, ev.id);
    // Two workers found that it fails where the first passed it (the sanitizer runs only on
    // confirmations): it fails.
    store_.finish_candidate(c.id, ev.id, ev.evaluation.status(), std::nullopt, 0, false, v1::RESULT_SOURCE_MEASURED);
    spdlog::warn("event=confirmation_failed run_id={} candidate_id={} status={} message=\"{}\"", run.id, c.id,
                 v1::EvalStatus_Name(ev.evaluation.status()), ev.evaluation.message());
    return;
  }
  settle(run, c, {&*first, &*second, &ev}, ev.id);
}

void ResultAdmission::settle_disputed(const RunRecord& run, const CandidateRecord& c) {
  const auto first = store_.get_evaluation(*c.first_evaluation_id);
  const auto second = store_.get_evaluation(*c.second_evaluation_id);
  settle(run, c, {&*first, &*second}, second->id);
}

void ResultAdmission::settle(const RunRecord& run, const CandidateRecord& c,
                             const std::vector<const EvaluationRecord*>& records, int64_t final_evaluation_id) {
  // Out of the elites, at the slowest time given: a fast lie does not even steer the breeding.
  std::optional<double> slowest, fastest;
  v1::EvalStatus status = records.back()->evaluation.status();
  for (const auto* r : records) {
    const Measurement m = measurement(run, *r);
    if (!m.ok) continue;
    status = v1::OK;
    slowest = std::max(slowest.value_or(m.us), m.us);
    fastest = std::min(fastest.value_or(m.us), m.us);
  }
  const double spread_pct = slowest ? spread(*fastest, *slowest) * 100 : 0;
  store_.finish_candidate(c.id, final_evaluation_id, status, slowest, spread_pct, false, v1::RESULT_SOURCE_MEASURED);
  spdlog::warn("event=confirmation_disputed run_id={} candidate_id={} measurements={} fitness_us={} spread_pct={:.2f} "
               "admitted=false",
               run.id, c.id, records.size(), slowest ? fmt::format("{:.3f}", *slowest) : "none", spread_pct);
}

void ResultAdmission::admit(const RunRecord& run, const CandidateRecord& c, const EvaluationRecord& a,
                            const EvaluationRecord& b, int64_t final_evaluation_id) {
  const Measurement ma = measurement(run, a), mb = measurement(run, b);
  const double mean = (ma.us + mb.us) / 2, spread_pct = spread(ma.us, mb.us) * 100;
  // Two identities of one enrolment are one party: their agreement is no peer's.
  const bool self = workers_.same_party(a.worker_id, b.worker_id);
  store_.finish_candidate(c.id, final_evaluation_id, v1::OK, mean, spread_pct, true, v1::RESULT_SOURCE_MEASURED);
  if (self) {
    store_.set_self_confirmed(c.id);
  } else {
    count_verdict(a.worker_id, true, "");
    count_verdict(b.worker_id, true, "");
    store_.cache_put({c.genome_hash, cache_problem_key(run), run.device_class,
                      cache_measurement_key(b.evaluation.device(), run), final_evaluation_id, mean, spread_pct, true});
  }
  spdlog::info("event=confirmation_done run_id={} candidate_id={} first_us={:.3f} second_us={:.3f} spread_pct={:.2f} "
               "admitted=true confirmed_by={} cached={}",
               run.id, c.id, ma.us, mb.us, spread_pct, self ? "self" : "peer", !self);
}

void ResultAdmission::count_verdict(const std::string& worker_id, bool agreed, const std::string& why) {
  // Quarantined: what they hold goes back to the queue, no attempt charged to the candidates.
  for (const auto& quarantined : workers_.count_verdict(worker_id, agreed, why))
    for (const auto& l : store_.active_leases_of(quarantined)) {
      store_.set_lease_outcome(l.id, LeaseOutcome::kExpired);
      const auto c = store_.get_candidate(l.candidate_id);
      if (c && c->lease_id == l.id) store_.requeue_candidate(c->id, false);
      spdlog::warn("event=lease_returned lease_id={} candidate_id={} worker_id={} reason=quarantined", l.id,
                   l.candidate_id, quarantined);
    }
}

}  // namespace evo
