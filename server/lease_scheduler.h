#pragma once
// The lease scheduler: which queued candidate goes to which worker, and what a result does.
// A lease request takes the active runs in turn (RunTurns), skips those of another device class,
// answers what it can from the result cache (which may complete a generation, so the run's queue
// is read again) and leases the rest; a confirmation goes to another live worker of the class
// when there is one (result_admission.h). Every worker call is authenticated by the worker's
// credential (worker_registry.h). A report is checked against the run and the physical floor of
// the registered device (device_floors.h), recorded, and moves its candidate on: a would-be elite
// is queued for a confirming measurement, any other result is final. Leases expire
// unless renewed by heartbeats; an expired one requeues its candidate, or after
// kMaxLeaseAttempts records it as a CRASH. A lease is charged only for time evod was live (its
// sweeper's ticks, kept in the store: a stall or a restart moves every open lease on by the gap),
// and only once it reached its worker (a lease request that names the leases its worker holds
// returns the others at once, uncharged; a grant whose caller gave up is never committed). Over the leases, evaluations and result cache tables,
// with the worker registry for who asks and the run lifecycle for what a lease or a result does
// to its run.
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "result_admission.h"
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

// A lease request whose caller gave up (deadline passed, cancelled) before its leases were
// committed: nothing was granted.
class CallerGone : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LeaseScheduler {
 public:
  LeaseScheduler(Store& store, WorkerRegistry& workers, RunLifecycle& runs, int lease_ttl_ms, Clock clock);

  // RPCs, each one transaction. caller_waits is asked just before the lease transaction commits:
  // false (the caller's deadline passed, or it cancelled) rolls it back and throws CallerGone, so
  // that no lease is granted that nobody receives.
  // *changed (when given) says whether the call changed any state (granted or returned a lease,
  // answered a candidate from the cache): an empty poll changes nothing, and wakes no watcher.
  v1::LeaseResponse lease(const v1::LeaseRequest& request, const std::function<bool()>& caller_waits = {},
                          bool* changed = nullptr);
  v1::ReportResponse report(const v1::ReportRequest& request);
  // The worker is live; of the leases it names, those it still holds get one TTL more, the rest
  // are answered as expired.
  v1::HeartbeatResponse heartbeat(const v1::HeartbeatRequest& request);

  // The sweeper's tick: records evod's liveness (after a stall, moves every open lease on by the
  // gap plus one TTL, for the heartbeats queued meanwhile to land), then re-queues candidates whose lease expired
  // unreported; returns how many leases expired. evod calls it every sweep_period_ms().
  int sweep_expired_leases();
  int sweep_period_ms() const;

  // Called once when evod starts on an existing database, before it serves: every active lease
  // is moved on by the time evod was down (since the last tick it recorded) plus
  // server::kReconnectGraceMs, and to at least one TTL from now. While evod was down no worker
  // could heartbeat or report, so without this the leases in flight would expire on restart,
  // their finished work would be refused, and a candidate would be charged an attempt for evod's
  // own outage (after kMaxLeaseAttempts, recorded as a CRASH it never caused). Workers that died
  // meanwhile lose their leases that much later. Returns how many leases were active.
  int resume_leases_after_restart();

 private:
  struct Request;  // one lease request being filled

  // Leases of the worker that its request does not name as held: returned to the queue, uncharged.
  void return_unreceived(Request& request, const v1::LeaseRequest& req);
  // How many more leases the worker may hold: its share of the open work (queued and leased
  // candidates) of the active runs its class may lease, over the class's live workers and
  // rounded up, less the leases it holds. A worker alone takes all it asks; several share a generation, so
  // that a worker holding leases ahead (--max-inflight) does not keep one from another that
  // would measure it now.
  int fair_share_left(const Request& request);
  // The sweeper's liveness record; a gap beyond the period moves every open lease on.
  void observe_liveness(int64_t now);

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
  // Moves the candidate on by its measured result (result_admission.h): to a confirmation, a
  // third measurement, or done. Then breeds the next generation when this one is complete.
  void apply_result(const RunRecord& run, const CandidateRecord& candidate, const EvaluationRecord& evaluation);
  bool would_enter_elites(const RunRecord& run, double fitness_us);
  // After a candidate's state changed: its generation's would-be elites ranked once its first
  // measurements are in (result_admission.h), then the next generation bred once it is done.
  void settle_generation(const std::string& run_id);

  // sweep_expired_leases() for one lease, inside its transaction.
  void expire(const LeaseRecord& lease);

  Store& store_;
  WorkerRegistry& workers_;
  RunLifecycle& runs_;
  ResultAdmission admission_;
  int lease_ttl_ms_;
  Clock clock_;
  RandomIds ids_;
  RunTurns turns_;
};

}  // namespace evo
