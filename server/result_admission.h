#pragma once
// Result admission: which measurements a run believes, and which the result cache keeps.
//
// A would-be elite (an OK result that would enter its run's top k when it arrives) waits until
// its generation's first measurements are all in; they are ranked with the run's elites, and only
// those still in the top k are measured a second time (at most k a generation: early in a run
// nearly every passing candidate beats a short list, and most would leave it within their own
// generation). One exception: a result faster than every elite and every confirmation under way
// (the run's new best) is confirmed at once, so that a run cut short keeps the best it measured.
// The others end on their one measurement, outside the elites. The second is
// measured by a live, trusted worker of the class of another party (worker_registry.h: another
// enrolment, or another unenrolled worker) when there is one, else by the same party (then the
// elite is labelled self-confirmed). Two measurements agree when both are OK and within
// kConfirmationTolerance of their mean, or both fail. Agreeing, the candidate is admitted at the
// mean; disagreeing, a third worker (of neither party) measures it and the two that agree
// decide, the third being counted against the worker they outvoted (worker_registry.h
// quarantines a worker that keeps disagreeing, and its enrolment with it). With no third worker live, or when all three
// disagree, the candidate is settled out of the elites at the slowest time it was given.
//
// The result cache takes only times two parties agreed on: a time one worker gave, a failure one
// worker reported, or a self-confirmed elite never answers a later run.
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "run_lifecycle.h"
#include "store.h"
#include "worker_registry.h"

namespace evo {

// The result cache's keys: the run's problem (its shapes, in order) and how a time was measured
// (the worker's compiler, runtime and timing method, the template's code, the run's fitness inputs).
std::string cache_problem_key(const RunRecord& run);
std::string cache_measurement_key(const v1::DeviceInfo& device, const RunRecord& run);

class ResultAdmission {
 public:
  ResultAdmission(Store& store, WorkerRegistry& workers);

  // What a worker asking for leases may do with a queued candidate now: measure it, leave it for
  // another worker, or (a disagreement no third worker is live to settle) have it settled.
  enum class Placement { kLease, kLeaveForAnother, kSettle };
  Placement placement(const CandidateRecord& candidate, const WorkerRecord& worker, int64_t now_ms);

  // The steps of a report, inside its transaction; the candidate is the one the lease was for.
  // A first measurement: a would-be elite awaits its generation's ranking (but one faster than the
  // run's elites and its confirmations under way is confirmed at once), anything else is final
  // (and kept out of the cache: one worker's word).
  void first_measurement(const RunRecord& run, const CandidateRecord& candidate, const EvaluationRecord& evaluation,
                         bool would_be_elite);
  // Once no first measurement of the run's current generation is outstanding: its would-be elites
  // still in the top k are released to be confirmed, the rest end outside the elites.
  void rank_generation(const RunRecord& run);
  // The second or third measurement of a would-be elite.
  void confirming_measurement(const RunRecord& run, const CandidateRecord& candidate,
                              const EvaluationRecord& evaluation, int64_t now_ms);
  // A disagreement that no third worker can settle: out of the elites, at the slowest time given.
  void settle_disputed(const RunRecord& run, const CandidateRecord& candidate);

 private:
  // The times a would-be elite must beat to rank: the run's elites' and, by their first
  // measurement, its confirmations under way.
  std::vector<double> standing_times(const RunRecord& run);
  // Counts a verdict; a worker quarantined by it hands its open leases back.
  void count_verdict(const std::string& worker_id, bool agreed, const std::string& why);
  void settle(const RunRecord& run, const CandidateRecord& candidate,
              const std::vector<const EvaluationRecord*>& measurements, int64_t final_evaluation_id);
  void admit(const RunRecord& run, const CandidateRecord& candidate, const EvaluationRecord& a,
             const EvaluationRecord& b, int64_t final_evaluation_id);

  Store& store_;
  WorkerRegistry& workers_;
};

}  // namespace evo
