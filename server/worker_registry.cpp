#include "worker_registry.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "server_config.h"
#include "template_registry.h"

namespace evo {

namespace {

using Code = CoordinatorError::Code;

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

WorkerRegistry::WorkerRegistry(Store& store, int lease_ttl_ms, Clock clock)
    : store_(store), lease_ttl_ms_(lease_ttl_ms), clock_(std::move(clock)) {
  if (lease_ttl_ms_ <= 0) throw InputError("lease TTL must be positive");
}

v1::RegisterWorkerResponse WorkerRegistry::register_worker(const v1::RegisterWorkerRequest& req) {
  if (req.device().device_class().empty())
    throw CoordinatorError(Code::kInvalidArgument, "register: device.device_class is empty");
  if (const std::string why = foreign_templates(req.device()); !why.empty()) {
    spdlog::warn("event=worker_refused name={} reason=\"{}\"", req.name(), why);
    throw CoordinatorError(Code::kFailedPrecondition, "register: " + why);
  }
  WorkerRecord w;
  w.name = req.name().empty() ? "unnamed" : req.name();
  w.device = req.device();
  w.registered_ms = w.last_seen_ms = clock_();
  store_.transaction([&] {
    w.id = ids_.next("w-");
    store_.upsert_worker(w);
  });
  spdlog::info("event=worker_registered worker_id={} name={} device_class=\"{}\" measurement=\"{}\"", w.id,
               w.name, w.device.device_class(), measurement_key_of(w.device));
  v1::RegisterWorkerResponse resp;
  resp.set_worker_id(w.id);
  resp.set_lease_ttl_ms(lease_ttl_ms_);
  resp.set_heartbeat_interval_ms(heartbeat_interval_ms());
  return resp;
}

v1::ListWorkersResponse WorkerRegistry::list_workers(const v1::ListWorkersRequest& req) {
  v1::ListWorkersResponse resp;
  const int64_t now = clock_();
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

WorkerRecord WorkerRegistry::require(const std::string& worker_id) {
  auto w = store_.get_worker(worker_id);
  if (!w) throw CoordinatorError(Code::kNotFound, "unknown worker '" + worker_id + "': register first");
  return *w;
}

std::optional<WorkerRecord> WorkerRegistry::find(const std::string& worker_id) {
  return store_.get_worker(worker_id);
}

void WorkerRegistry::touch(const std::string& worker_id, int64_t now_ms) { store_.touch_worker(worker_id, now_ms); }

bool WorkerRegistry::another_live_worker(const WorkerRecord& worker, int64_t now_ms) {
  return store_.count_live_workers(worker.device.device_class(), live_since(now_ms), worker.id) > 0;
}

int WorkerRegistry::live_workers_for(const RunRecord& run, int64_t now_ms) {
  const int64_t since = live_since(now_ms);
  return run.device_class.empty() ? store_.count_live_workers_of_any_class(since)
                                  : store_.count_live_workers(run.device_class, since, "");
}

int WorkerRegistry::heartbeat_interval_ms() const { return std::max(50, lease_ttl_ms_ / 3); }

int64_t WorkerRegistry::live_since(int64_t now_ms) const {
  return now_ms - int64_t(server::kLiveWorkerHeartbeats) * heartbeat_interval_ms();
}

}  // namespace evo
