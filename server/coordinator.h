#pragma once
// The coordinator: what evod does, without gRPC, as one object the gRPC service
// (coordinator_service.h) calls. It owns three managers over the one Store, each over its own
// tables, and forwards each call to the one that owns it:
//   - RunLifecycle (run_lifecycle.h): submit, advance a run through its generations, cancel, end;
//   - LeaseScheduler (lease_scheduler.h): leases across runs in turn, the result cache, lease
//     expiry, reports and the confirmation of would-be elites;
//   - WorkerRegistry (worker_registry.h): register, liveness, ListWorkers;
// and the read side, RunViews (run_views.h). Every call that changes state is one Store
// transaction, so a process killed at any instant restarts from the database with nothing lost.
// Beside forwarding, the coordinator counts state changes for WatchRun and computes one status per
// change that every watcher of the run shares.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <functional>
#include <mutex>
#include <string>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "lease_scheduler.h"
#include "run_lifecycle.h"
#include "run_views.h"
#include "server_config.h"
#include "store.h"
#include "worker_registry.h"

namespace evo {

struct CoordinatorOptions {
  int lease_ttl_ms = server::kDefaultLeaseTtlMs;
  // Registrations need an enrolment key (evod --enrolled-workers-only; worker_registry.h).
  bool enrolled_only = false;
  Clock clock = now_unix_ms;  // injectable for tests
};

class Coordinator {
 public:
  Coordinator(Store& store, CoordinatorOptions options);

  // Workers.
  v1::RegisterWorkerResponse register_worker(const v1::RegisterWorkerRequest& request);
  // caller_waits: LeaseScheduler::lease's (false once the caller gave up: nothing is granted).
  v1::LeaseResponse lease(const v1::LeaseRequest& request, const std::function<bool()>& caller_waits = {});
  v1::ReportResponse report(const v1::ReportRequest& request);
  v1::HeartbeatResponse heartbeat(const v1::HeartbeatRequest& request);

  // Users.
  v1::Run submit(const v1::SubmitRunRequest& request);
  v1::RunStatus status(const std::string& run_id);
  v1::LeaderboardResponse leaderboard(const v1::LeaderboardRequest& request);
  v1::ListCandidatesResponse list_candidates(const v1::ListCandidatesRequest& request);
  v1::ListRunsResponse list_runs();
  v1::ListWorkersResponse list_workers(const v1::ListWorkersRequest& request);
  v1::Run cancel(const std::string& run_id);
  // Run id, generation and the stored evaluation of the leaderboard's first elite (for export).
  using Best = RunBest;
  Best best_of(const std::string& run_id);

  // LeaseScheduler::sweep_expired_leases and resume_leases_after_restart.
  int sweep_expired_leases();
  int resume_leases_after_restart();
  // How often evod's sweeper calls sweep_expired_leases (its liveness tick).
  int sweep_period_ms() const;
  // RunLifecycle::breed_waiting_generations in a transaction of its own; evod's sweeper calls it
  // every period.
  int breed_waiting_generations();
  // RunLifecycle::end_spent_budgets in a transaction of its own; evod's sweeper calls it too.
  int end_spent_budgets();

  // For WatchRun: a counter bumped by every state change, and a wait for it to move.
  uint64_t change_count() const;
  // The run's status for watchers: computed once per change and shared by every watcher of the
  // run (recomputed when older than half a watch interval, for elapsed and ETA), so that N
  // watchers cost one status computation per change, not N.
  v1::RunStatus watched_status(const std::string& run_id);
  // How many statuses watched_status computed (for tests).
  uint64_t watched_status_builds() const;
  // Returns when change_count() != seen, or after timeout_ms, or after wake_all().
  void wait_for_change(uint64_t seen, int timeout_ms);
  void wake_all();

 private:
  void notify_change();

  struct SharedStatus {
    uint64_t change = 0;
    int64_t built_ms = 0;
    v1::RunStatus status;
  };

  Store& store_;
  Clock clock_;
  WorkerRegistry workers_;
  RunLifecycle runs_;
  LeaseScheduler leases_;
  RunViews views_;

  mutable std::mutex change_mutex_;
  std::condition_variable change_cv_;
  uint64_t changes_ = 0;

  // Held while a shared status is computed: the other watchers wait for it, then read it.
  mutable std::mutex watched_mutex_;
  std::map<std::string, SharedStatus> watched_;  // by run id
  uint64_t watched_builds_ = 0;                  // guarded by watched_mutex_
};

}  // namespace evo
