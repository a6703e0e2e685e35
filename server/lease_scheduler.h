#pragma once
// The lease scheduler: which queued candidate goes to which worker, and what a result does.
// A lease request takes the active runs in turn (RunTurns), skips those of another device class,
// answers what it can from the result cache (which may complete a generation, so the run's queue
// is read again) and leases the rest; a confirmation goes preferably to another live worker of the
// class. A report records the evaluation and moves its candidate on: a would-be elite is queued
// for a confirming second measurement, any other result is final and cached. Leases expire
// unless renewed by heartbeats; an expired one requeues its candidate, or after
// kMaxLeaseAttempts records it as a CRASH. Over the leases, evaluations and result cache tables,
// with the worker registry for who asks and the run lifecycle for what a lease or a result does
// to its run.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "run_lifecycle.h"
#include "store.h"
#include "worker_registry.h"

namespace evo {

// Concurrent runs take turns: each lease request starts with the run after the one that got the
// previous lease, so that a second run submitted beside a long first one is not starved until the
// first is done. The cursor is kept in memory, not in the store: after a restart, or once the run
// it names has ended, the turns start again from the oldest run.
class RunTurns {
 public:
  // The active runs (oldest first), rotated to start after the run that got the last lease.
  std::vector<RunRecord> in_turn(std::vector<RunRecord> runs) const;
  void leased(const std::string& run_id);

 private:
  mutable std::mutex mutex_;
  std::string last_leased_run_;
};

class LeaseScheduler {
 public:
  LeaseScheduler(Store& store, WorkerRegistry& workers, RunLifecycle& runs, int lease_ttl_ms, Clock clock);

  // RPCs, each one transaction.
  v1::LeaseResponse lease(const v1::LeaseRequest& request);
  v1::ReportResponse report(const v1::ReportRequest& request);
  // The worker is live; of the leases it names, those it still holds get one TTL more, the rest
  // are answered as expired.
  v1::HeartbeatResponse heartbeat(const v1::HeartbeatRequest& request);

  // Re-queues candidates whose lease expired unreported; returns how many leases expired.
  int sweep_expired_leases();

  // Called once when evod starts on an existing database, before it serves: every active lease
  // gets at least one TTL from now. While evod was down no worker could heartbeat, so without
  // this every lease in flight would expire at once on restart, its finished work would be
  // refused, and a candidate would be charged an attempt for evod's own crash (after
  // kMaxLeaseAttempts restarts, recorded as a CRASH it never caused). Workers that died meanwhile
  // lose their leases one TTL later. Returns how many leases were active.
  int resume_leases_after_restart();

 private:
  struct Request;  // one lease request being filled

  // The steps of lease(), each inside its transaction.
  void lease_from_run(Request& request, const std::string& run_id);
  bool lease_from_queue(Request& request, RunRecord& run);
  void grant(Request& request, RunRecord& run, const CandidateRecord& candidate);
  // Answers a candidate from the result cache; false when the cache has nothing for it.
  bool try_cache(const RunRecord& run, const CandidateRecord& candidate, const v1::DeviceInfo& device);

  // The steps of report(), inside its transaction.
  EvaluationRecord checked_evaluation(const v1::ReportRequest& request, const WorkerRecord& worker,
                                      const LeaseRecord& lease, const CandidateRecord& candidate,
                                      const RunRecord& run);
  // Records a result for a candidate (measured, cached or a give-up) and moves the candidate on:
  // to a confirmation, or done. Then breeds the next generation when this one is complete.
  void apply_result(const RunRecord& run, const CandidateRecord& candidate, int64_t evaluation_id,
                    const v1::Evaluation& evaluation, const std::string& worker_id);
  void apply_confirmation(const RunRecord& run, const CandidateRecord& candidate, int64_t evaluation_id,
                          const v1::Evaluation& evaluation);
  bool would_enter_elites(const RunRecord& run, double fitness_us);

  // sweep_expired_leases() for one lease, inside its transaction.
  void expire(const LeaseRecord& lease);

  Store& store_;
  WorkerRegistry& workers_;
  RunLifecycle& runs_;
  int lease_ttl_ms_;
  Clock clock_;
  RandomIds ids_;
  RunTurns turns_;
};

}  // namespace evo
