#pragma once
// The worker registry: who registered, with which device, and who is live. A worker is live while
// evod heard from it (a registration, lease, report or heartbeat) within kLiveWorkerHeartbeats
// heartbeat intervals; the live count is what a run's status says can serve it, and "another live
// worker of the class" is what a confirmation is placed on. Over the workers table of the Store.
#include <cstdint>
#include <optional>
#include <string>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "store.h"

namespace evo {

class WorkerRegistry {
 public:
  WorkerRegistry(Store& store, int lease_ttl_ms, Clock clock);

  // RPCs, each one transaction. register_worker refuses a worker whose device has no class
  // (kInvalidArgument) or whose kernel templates are not evod's (kFailedPrecondition).
  v1::RegisterWorkerResponse register_worker(const v1::RegisterWorkerRequest& request);
  v1::ListWorkersResponse list_workers(const v1::ListWorkersRequest& request);

  // The rest run inside the caller's transaction.
  // The registered worker; kNotFound when it never registered.
  WorkerRecord require(const std::string& worker_id);
  std::optional<WorkerRecord> find(const std::string& worker_id);
  // Heard from the worker at now_ms.
  void touch(const std::string& worker_id, int64_t now_ms);
  // Whether a live worker of this worker's device class, other than it, is around.
  bool another_live_worker(const WorkerRecord& worker, int64_t now_ms);
  // The live workers that could lease the run: of its device class, or of any class before its
  // first lease fixes one (RunStatus.live_workers).
  int live_workers_for(const RunRecord& run, int64_t now_ms);

  // How often workers are told to heartbeat (a third of the lease TTL, at least 50 ms), and the
  // oldest last-seen time of a worker still live at now_ms.
  int heartbeat_interval_ms() const;
  int64_t live_since(int64_t now_ms) const;

 private:
  Store& store_;
  int lease_ttl_ms_;
  Clock clock_;
  RandomIds ids_;
};

}  // namespace evo
