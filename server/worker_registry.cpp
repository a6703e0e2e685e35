#include "worker_registry.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

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

// Why a device's backend and class do not fit together, or "" when they do. A model's class names
// it ("sm_90a/model/estimated"), so that its estimates never share a class, a run or a cache key
// with measurements; a worker cannot claim one backend and the other's class.
std::string backend_mismatch(const v1::DeviceInfo& device) {
  const bool estimated_class = device.device_class().size() >= 10 &&
                               device.device_class().compare(device.device_class().size() - 10, 10, "/estimated") == 0;
  if (device.backend() == "model")
    return estimated_class ? "" : "backend 'model' needs a device class ending in /estimated, not '" +
                                      device.device_class() + "'";
  if (device.backend() == "cuda")
    return estimated_class ? "backend 'cuda' measures; its device class '" + device.device_class() +
                                 "' may not end in /estimated"
                           : "";
  return "backend '" + device.backend().substr(0, 32) + "' is neither 'cuda' nor 'model'";
}

std::string hex(const unsigned char* bytes, size_t n) {
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) std::snprintf(&out[2 * i], 3, "%02x", bytes[i]);
  return out;
}

CoordinatorError refused(const v1::RegisterWorkerRequest& req, const std::string& why) {
  spdlog::warn("event=worker_refused name={} reason=\"{}\"", req.name().substr(0, 64), why);
  return CoordinatorError(Code::kPermissionDenied, "register: " + why);
}

}  // namespace

bool estimates(const WorkerRecord& worker) { return worker.device.backend() == "model"; }

std::string party_of(const WorkerRecord& worker) {
  return worker.enrolment.empty() ? worker.id : "enrolment:" + worker.enrolment;
}

std::string new_secret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no random bytes for a secret");
  return hex(bytes, sizeof bytes);
}

// Comparing hashes in variable time leaks at most how much of SHA-256(guess) matches the stored
// hash, which says nothing about the secret.
std::string secret_hash(const std::string& secret) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), digest);
  return hex(digest, sizeof digest);
}

WorkerRegistry::WorkerRegistry(Store& store, int lease_ttl_ms, Clock clock, bool enrolled_only)
    : store_(store), lease_ttl_ms_(lease_ttl_ms), clock_(std::move(clock)), enrolled_only_(enrolled_only) {
  if (lease_ttl_ms_ <= 0) throw InputError("lease TTL must be positive");
}

v1::RegisterWorkerResponse WorkerRegistry::register_worker(const v1::RegisterWorkerRequest& req) {
  if (req.device().device_class().empty())
    throw CoordinatorError(Code::kInvalidArgument, "register: device.device_class is empty");
  if (const std::string why = backend_mismatch(req.device()); !why.empty())
    throw CoordinatorError(Code::kInvalidArgument, "register: " + why);
  if (const std::string why = foreign_templates(req.device()); !why.empty()) {
    spdlog::warn("event=worker_refused name={} reason=\"{}\"", req.name(), why);
    throw CoordinatorError(Code::kFailedPrecondition, "register: " + why);
  }
  WorkerRecord w;
  w.name = req.name().empty() ? "unnamed" : req.name();
  w.device = req.device();
  w.registered_ms = w.last_seen_ms = clock_();
  const std::string credential = new_secret();
  w.credential_hash = secret_hash(credential);
  const std::string key_hash = req.enrolment_key().empty() ? "" : secret_hash(req.enrolment_key());
  store_.transaction([&] {
    if (!key_hash.empty()) {
      const auto e = store_.enrolment_with_key(key_hash);
      if (!e)
        throw refused(req, "the enrolment key is not one evod knows (a newer key for its name replaces the "
                      "old): ask the operator of evod's host for the key `evod enrol NAME` printed");
      if (!e->refused.empty())
        throw refused(req, "enrolment '" + e->name + "' is refused: " + e->refused +
                      " (the operator of evod's host lifts it with `evod enrol --release " + e->name + "`)");
      w.enrolment = e->name;
    } else if (enrolled_only_) {
      throw refused(req, "this evod takes only enrolled workers (--enrolled-workers-only): give evo-worker "
                    "--enrolment-key-file FILE, with a key `evod enrol NAME` made on evod's host");
    }
    w.id = ids_.next("w-");
    store_.upsert_worker(w);
  });
  spdlog::info("event=worker_registered worker_id={} name={} enrolment={} device_class=\"{}\" backend={} "
               "measurement=\"{}\"",
               w.id, w.name, w.enrolment.empty() ? "-" : w.enrolment, w.device.device_class(), w.device.backend(),
               measurement_key_of(w.device));
  v1::RegisterWorkerResponse resp;
  resp.set_worker_id(w.id);
  resp.set_credential(credential);
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
      out->set_quarantined(w.quarantined);
      out->set_agreements(w.agreements);
      out->set_disagreements(w.disagreements);
      out->set_enrolment(w.enrolment);
    }
  });
  return resp;
}

WorkerRecord WorkerRegistry::authenticate(const std::string& worker_id, const std::string& credential) {
  WorkerRecord w = require(worker_id);
  // A worker registered before credentials existed has none: it must register again.
  if (w.credential_hash.empty() || secret_hash(credential) != w.credential_hash)
    throw CoordinatorError(Code::kPermissionDenied,
                           "worker '" + worker_id + "': " +
                               (credential.empty() ? "the call carries no credential"
                                                   : "the credential is not the one evod issued to it") +
                               " (a worker acts only as itself: register to get an id and credential)");
  if (!w.quarantined.empty())
    throw CoordinatorError(Code::kPermissionDenied, "worker '" + worker_id + "' is quarantined: " + w.quarantined);
  return w;
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

bool WorkerRegistry::another_live_party(const std::string& device_class, const std::vector<std::string>& except_workers,
                                        int64_t now_ms) {
  std::vector<std::string> parties;
  for (const auto& id : except_workers) {
    const auto w = store_.get_worker(id);
    parties.push_back(w ? party_of(*w) : id);
  }
  return store_.count_live_workers(device_class, live_since(now_ms), parties) > 0;
}

bool WorkerRegistry::same_party(const std::string& worker_a, const std::string& worker_b) {
  if (worker_a == worker_b) return true;
  const auto a = store_.get_worker(worker_a), b = store_.get_worker(worker_b);
  return a && b && party_of(*a) == party_of(*b);
}

std::vector<std::string> WorkerRegistry::count_verdict(const std::string& worker_id, bool agreed,
                                                       const std::string& why) {
  store_.count_worker_verdict(worker_id, agreed);
  const auto w = store_.get_worker(worker_id);
  if (!w || !w->quarantined.empty() || agreed) return {};
  spdlog::warn("event=worker_disagreed worker_id={} disagreements={} agreements={} why=\"{}\"", w->id,
               w->disagreements, w->agreements, why);
  if (w->disagreements < server::kQuarantineDisagreements || w->disagreements <= w->agreements) return {};
  const std::string reason = std::to_string(w->disagreements) + " of its results disagreed with its peers' (" +
                             std::to_string(w->agreements) + " agreed); the last: " + why;
  std::vector<std::string> quarantined{w->id};
  store_.quarantine_worker(w->id, reason);
  spdlog::error("event=worker_quarantined worker_id={} name={} reason=\"{}\"", w->id, w->name, reason);
  if (!w->enrolment.empty()) {
    // Every identity of the enrolment goes with it, and it registers no new one.
    for (const auto& other : store_.workers_of_enrolment(w->enrolment))
      if (other.id != w->id && other.quarantined.empty()) quarantined.push_back(other.id);
    store_.quarantine_enrolment(w->enrolment, "worker " + w->id + " was quarantined: " + reason);
    spdlog::error("event=enrolment_quarantined enrolment={} workers={} cause={}", w->enrolment, quarantined.size(),
                  w->id);
  }
  return quarantined;
}

int WorkerRegistry::live_workers_for(const RunRecord& run, int64_t now_ms) {
  return run.device_class.empty() ? store_.count_live_workers_of_any_class(live_since(now_ms))
                                  : live_workers_of_class(run.device_class, now_ms);
}

int WorkerRegistry::live_workers_of_class(const std::string& device_class, int64_t now_ms) {
  return store_.count_live_workers(device_class, live_since(now_ms), {});
}

int WorkerRegistry::heartbeat_interval_ms() const { return std::max(50, lease_ttl_ms_ / 3); }

int64_t WorkerRegistry::live_since(int64_t now_ms) const {
  return now_ms - int64_t(server::kLiveWorkerHeartbeats) * heartbeat_interval_ms();
}

}  // namespace evo
