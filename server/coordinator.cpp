#include "coordinator.h"

#include <chrono>

namespace evo {

Coordinator::Coordinator(Store& store, CoordinatorOptions options)
    : store_(store),
      clock_(options.clock),
      workers_(store, options.lease_ttl_ms, options.clock, options.enrolled_only),
      runs_(store, options.clock),
      leases_(store, workers_, runs_, options.lease_ttl_ms, options.clock),
      views_(store, workers_, options.clock) {}

// ---------------------------------------------------------------- workers

v1::RegisterWorkerResponse Coordinator::register_worker(const v1::RegisterWorkerRequest& req) {
  return workers_.register_worker(req);
}

v1::LeaseResponse Coordinator::lease(const v1::LeaseRequest& req, const std::function<bool()>& caller_waits) {
  bool changed = false;
  v1::LeaseResponse resp = leases_.lease(req, caller_waits, &changed);
  if (changed) notify_change();  // an empty poll wakes no watcher
  return resp;
}

v1::ReportResponse Coordinator::report(const v1::ReportRequest& req) {
  v1::ReportResponse resp = leases_.report(req);
  if (!resp.duplicate()) notify_change();
  return resp;
}

v1::HeartbeatResponse Coordinator::heartbeat(const v1::HeartbeatRequest& req) { return leases_.heartbeat(req); }

v1::ListWorkersResponse Coordinator::list_workers(const v1::ListWorkersRequest& req) {
  return workers_.list_workers(req);
}

int Coordinator::sweep_expired_leases() {
  const int expired = leases_.sweep_expired_leases();
  if (expired) notify_change();
  return expired;
}

int Coordinator::resume_leases_after_restart() { return leases_.resume_leases_after_restart(); }

int Coordinator::sweep_period_ms() const { return leases_.sweep_period_ms(); }

int Coordinator::breed_waiting_generations() {
  int waiting = 0;
  store_.transaction([&] { waiting = runs_.breed_waiting_generations(); });
  if (waiting) notify_change();
  return waiting;
}

int Coordinator::end_spent_budgets() {
  int ended = 0;
  store_.transaction([&] { ended = runs_.end_spent_budgets(); });
  if (ended) notify_change();
  return ended;
}

// ---------------------------------------------------------------- users

v1::Run Coordinator::submit(const v1::SubmitRunRequest& req) {
  v1::Run run = to_proto(runs_.submit(req));
  notify_change();
  return run;
}

v1::Run Coordinator::cancel(const std::string& run_id) {
  v1::Run run = to_proto(runs_.cancel(run_id));
  notify_change();
  return run;
}

v1::RunStatus Coordinator::status(const std::string& run_id) { return views_.status(run_id); }

v1::ListRunsResponse Coordinator::list_runs() { return views_.list_runs(); }

v1::LeaderboardResponse Coordinator::leaderboard(const v1::LeaderboardRequest& req) {
  return views_.leaderboard(req);
}

v1::ListCandidatesResponse Coordinator::list_candidates(const v1::ListCandidatesRequest& req) {
  return views_.list_candidates(req);
}

Coordinator::Best Coordinator::best_of(const std::string& run_id) { return views_.best_of(run_id); }

// ---------------------------------------------------------------- changes, for WatchRun

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

v1::RunStatus Coordinator::watched_status(const std::string& run_id) {
  const uint64_t change = change_count();
  std::lock_guard<std::mutex> lock(watched_mutex_);
  const int64_t now = clock_();
  auto it = watched_.find(run_id);
  if (it != watched_.end() && it->second.change == change && now - it->second.built_ms < server::kWatchIntervalMs / 2)
    return it->second.status;
  SharedStatus shared{change, now, views_.status(run_id)};
  ++watched_builds_;
  // Runs nobody watches any more are dropped with the rest once the map grows.
  if (watched_.size() >= 256) watched_.clear();
  watched_[run_id] = shared;
  return shared.status;
}

uint64_t Coordinator::watched_status_builds() const {
  std::lock_guard<std::mutex> lock(watched_mutex_);
  return watched_builds_;
}

void Coordinator::wait_for_change(uint64_t seen, int timeout_ms) {
  std::unique_lock<std::mutex> lock(change_mutex_);
  change_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
}

void Coordinator::wake_all() { notify_change(); }

}  // namespace evo
