#pragma once
// The daemon's side of the wire: one gRPC channel to evod and the calls the daemon makes, each
// retried with exponential backoff while evod is away. The link logs once per change of state
// (reachable <-> unreachable), never once per retry.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client_security.h"
#include "evo/evo.grpc.pb.h"

namespace evo {

class CoordinatorLink {
 public:
  // security: the token every call carries and whether the channel is TLS (default: neither).
  CoordinatorLink(const std::string& address, const std::atomic<bool>& stop,
                  security::ClientSecurity security = {});

  // Each retries while evod is unreachable; nullopt once stop is set. A status other than
  // UNAVAILABLE / DEADLINE_EXCEEDED is returned to the caller in *error and ends the retries.
  std::optional<v1::RegisterWorkerResponse> register_worker(const v1::RegisterWorkerRequest& req);
  std::optional<v1::LeaseResponse> lease(const v1::LeaseRequest& req, grpc::Status* error);
  std::optional<v1::ReportResponse> report(const v1::ReportRequest& req, grpc::Status* error);
  // One try, no retries: a missed heartbeat is retried by the next one.
  std::optional<v1::HeartbeatResponse> heartbeat(const v1::HeartbeatRequest& req, grpc::Status* error);

  // Sleeps up to ms, returning early when stop is set (after wake()).
  void sleep_for(int ms);
  void wake();

 private:
  template <typename Call>
  bool with_retries(const char* rpc, Call&& call, grpc::Status* error);
  void mark(bool reachable, const grpc::Status& status);
  // A call's deadline and token.
  void prepare(grpc::ClientContext& ctx) const;

  std::string address_;
  const std::atomic<bool>& stop_;
  security::ClientSecurity security_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int state_ = -1;  // -1 unknown, 0 unreachable, 1 reachable
};

}  // namespace evo
