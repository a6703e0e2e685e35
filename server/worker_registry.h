#pragma once
// The worker registry: who registered, with which device, who is live and who is trusted.
//
// Identity: a registration (under the shared token) gets a worker id and a credential, a random
// secret evod shows once and keeps only as a hash. Every later call of the worker names both
// (authenticate), so a token holder acts only as the workers it registered. What evod believes of
// a worker is fixed at its registration: its device, device class and backend (a "model" backend
// estimates, a "cuda" one measures), never a report's word.
//
// Parties: a registration may present the key of an enrolment the operator of evod's host made
// (`evod enrol NAME`); every worker registered under it is one party, "enrolment:NAME". A worker
// without one is a party of its own (its id). Confirmation asks for another party, not merely
// another worker, so that one holder of an enrolment key cannot confirm itself through a second
// identity; and a quarantine refuses the whole enrolment, later registrations included. With
// enrolled_only (evod --enrolled-workers-only) a registration without a valid key is refused, so a
// holder of the shared token alone can drive runs but not measure for them.
//
// Liveness: a worker is live while evod heard from it (a registration, lease, report or
// heartbeat) within kLiveWorkerHeartbeats heartbeat intervals; the live count is what a run's
// status says can serve it, and "another live worker of the class" is what a confirmation is
// placed on.
//
// Trust: each measurement of a worker's that a peer agreed with, or that two agreeing peers
// outvoted, is counted; a worker whose disagreements reach kQuarantineDisagreements and outnumber
// its agreements is quarantined: no more leases, its reports refused, its open leases handed back,
// and ListWorkers says why. (A report below the device's physical floor is refused outright and
// changes nothing, its lease included.) Over the workers table of the Store.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "store.h"

namespace evo {

class WorkerRegistry {
 public:
  WorkerRegistry(Store& store, int lease_ttl_ms, Clock clock, bool enrolled_only = false);

  // RPCs, each one transaction. register_worker refuses a worker whose device has no class, or
  // whose backend is not "cuda" or "model" or does not match its class (kInvalidArgument), whose
  // kernel templates are not evod's (kFailedPrecondition), or whose enrolment key is unknown, of a
  // refused enrolment, or missing where enrolled_only asks for one (kPermissionDenied).
  v1::RegisterWorkerResponse register_worker(const v1::RegisterWorkerRequest& request);
  v1::ListWorkersResponse list_workers(const v1::ListWorkersRequest& request);

  // The rest run inside the caller's transaction.
  // The registered worker whose credential this is: kNotFound when the id never registered,
  // kPermissionDenied when the credential is not the one issued to it or the worker is
  // quarantined.
  WorkerRecord authenticate(const std::string& worker_id, const std::string& credential);
  // The registered worker; kNotFound when it never registered.
  WorkerRecord require(const std::string& worker_id);
  std::optional<WorkerRecord> find(const std::string& worker_id);
  // Heard from the worker at now_ms.
  void touch(const std::string& worker_id, int64_t now_ms);
  // Whether a live, trusted worker of this device class is around that belongs to none of the
  // parties of the workers named.
  bool another_live_party(const std::string& device_class, const std::vector<std::string>& except_workers,
                          int64_t now_ms);
  // Whether two workers are one party (the same worker, or one enrolment).
  bool same_party(const std::string& worker_a, const std::string& worker_b);
  // The live workers that could lease the run: of its device class, or of any class before its
  // first lease fixes one (RunStatus.live_workers).
  int live_workers_for(const RunRecord& run, int64_t now_ms);
  // The live, trusted workers of a device class.
  int live_workers_of_class(const std::string& device_class, int64_t now_ms);

  // A measurement of the worker's that a peer agreed with (agreed), or that two agreeing peers
  // outvoted (why says how). Quarantines the worker once its disagreements reach
  // kQuarantineDisagreements and outnumber its agreements, and with it its enrolment and every
  // worker of that; returns the workers it quarantined now (the caller hands their open leases
  // back).
  std::vector<std::string> count_verdict(const std::string& worker_id, bool agreed, const std::string& why);

  // How often workers are told to heartbeat (a third of the lease TTL, at least 50 ms), and the
  // oldest last-seen time of a worker still live at now_ms.
  int heartbeat_interval_ms() const;
  int64_t live_since(int64_t now_ms) const;

 private:
  Store& store_;
  int lease_ttl_ms_;
  Clock clock_;
  bool enrolled_only_;
  RandomIds ids_;
};

// Whether a worker of this registered backend estimates (a model) rather than measures.
bool estimates(const WorkerRecord& worker);
// The party a worker acts for: "enrolment:NAME", or its own id when it registered without a key.
std::string party_of(const WorkerRecord& worker);
// A new secret (256 random bits, hex) and what the store keeps of one (its SHA-256, hex): the
// credentials registrations return and the keys `evod enrol` makes.
std::string new_secret();
std::string secret_hash(const std::string& secret);

}  // namespace evo
