#pragma once
// The coordinator's logic, without gRPC: runs and their generations, leases, results, elite
// admission and the leaderboard, all kept in the Store. Every call that changes state is one Store
// transaction, so a process killed at any instant restarts from the database with nothing lost.
// The gRPC service (coordinator_service.h) translates CoordinatorError codes into status codes.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>

#include "evo/evo.pb.h"
#include "server_config.h"
#include "store.h"

namespace evo {

class CoordinatorError : public std::runtime_error {
 public:
  enum class Code { kInvalidArgument, kNotFound, kFailedPrecondition };
  CoordinatorError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

struct CoordinatorOptions {
  int lease_ttl_ms = server::kDefaultLeaseTtlMs;
  std::function<int64_t()> clock = now_unix_ms;  // injectable for tests
};

class Coordinator {
 public:
  Coordinator(Store& store, CoordinatorOptions options);

  // Workers.
  v1::RegisterWorkerResponse register_worker(const v1::RegisterWorkerRequest& request);
  v1::LeaseResponse lease(const v1::LeaseRequest& request);
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
  struct Best {
    RunRecord run;
    CandidateRecord candidate;
    EvaluationRecord evaluation;
  };
  Best best_of(const std::string& run_id);

  // Re-queues candidates whose lease expired unreported; returns how many leases expired.
  int sweep_expired_leases();

  // Called once when evod starts on an existing database, before it serves: every active lease
  // gets at least one TTL from now. While evod was down no worker could heartbeat, so without
  // this every lease in flight would expire at once on restart, its finished work would be
  // refused, and a candidate would be charged an attempt for evod's own crash (after
  // kMaxLeaseAttempts restarts, recorded as a CRASH it never caused). Workers that died meanwhile
  // lose their leases one TTL later. Returns how many leases were active.
  int resume_leases_after_restart();

  // For WatchRun: a counter bumped by every state change, and a wait for it to move.
  uint64_t change_count() const;
  // Returns when change_count() != seen, or after timeout_ms, or after wake_all().
  void wait_for_change(uint64_t seen, int timeout_ms);
  void wake_all();

  int lease_ttl_ms() const { return options_.lease_ttl_ms; }

 private:
  struct RunContext;
  void notify_change();
  std::string random_id(const char* prefix);
  // Records a result for a candidate (measured, cached or a give-up) and moves the candidate on:
  // to a confirmation, or done. Then breeds the next generation when this one is complete.
  void apply_result(const RunRecord& run, const CandidateRecord& candidate, int64_t evaluation_id,
                    const v1::Evaluation& evaluation, const std::string& worker_id);
  bool try_cache(const RunRecord& run, const CandidateRecord& candidate, const v1::DeviceInfo& device);
  void advance_if_generation_complete(const std::string& run_id);
  bool would_enter_elites(const RunRecord& run, double fitness_us);
  v1::RunStatus build_status(const RunRecord& run);
  v1::Run to_proto(const RunRecord& run);
  RunRecord require_run(const std::string& run_id);
  WorkerRecord require_worker(const std::string& worker_id);
  // How often workers are told to heartbeat, and the oldest last-seen time of a worker still
  // counted as live (kLiveWorkerHeartbeats intervals before now).
  int heartbeat_interval_ms() const;
  int64_t live_since(int64_t now_ms) const;

  Store& store_;
  CoordinatorOptions options_;
  std::mt19937_64 rng_;

  // The run the last lease went to: the next lease request starts with the run after it, so that
  // concurrent runs take turns on the workers instead of the oldest taking them all.
  std::mutex schedule_mutex_;
  std::string last_leased_run_;

  mutable std::mutex change_mutex_;
  std::condition_variable change_cv_;
  uint64_t changes_ = 0;
};

// Elites of a run from its candidates: elite-eligible, with a fitness, in fitness order (ties by
// genome text), at most k.
std::vector<CandidateRecord> elites_of(const std::vector<CandidateRecord>& candidates, int k);

}  // namespace evo
