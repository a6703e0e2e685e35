#include "coordinator.h"

#include <chrono>

namespace evo {

Coordinator::Coordinator(Store& store, CoordinatorOptions options)
    : workers_(store, options.lease_ttl_ms, options.clock),
      runs_(store, options.clock),
      leases_(store, workers_, runs_, options.lease_ttl_ms, options.clock),
      views_(store, workers_, options.clock) {}

// ---------------------------------------------------------------- workers

v1::RegisterWorkerResponse Coordinator::register_worker(const v1::RegisterWorkerRequest& req) {
  return workers_.register_worker(req);
}

v1::LeaseResponse Coordinator::lease(const v1::LeaseRequest& req) {
  v1::LeaseResponse resp = leases_.lease(req);
  notify_change();
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

void Coordinator::wait_for_change(uint64_t seen, int timeout_ms) {
  std::unique_lock<std::mutex> lock(change_mutex_);
  change_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
}

void Coordinator::wake_all() { notify_change(); }

}  // namespace evo
