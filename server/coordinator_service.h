#pragma once
// The Coordinator gRPC service: each RPC is a thin call into Coordinator, with its errors turned
// into status codes (InputError/kInvalidArgument -> INVALID_ARGUMENT, kNotFound -> NOT_FOUND,
// kFailedPrecondition -> FAILED_PRECONDITION, a full disk or size cap -> RESOURCE_EXHAUSTED, a
// read-only, removed or failing database file -> UNAVAILABLE, anything else -> INTERNAL).
// Before that, every RPC passes the token gate (UNAUTHENTICATED when a token is set and the call
// does not carry it: worker, admin and read-only calls alike; refusals are logged through a
// RefusalLog, the first whole and the rest counted) and the request limits of
// request_limits.h (INVALID_ARGUMENT).
//
// Clients send genomes, never kernel source: no request message has a source field, and a lease
// carries only the canonical genome text, which evod and the worker parse against the template's
// search space. The only kernel source on the wire is ExportResponse.source, which evod generates
// from its own embedded template and sends to the client.
#include <atomic>

#include "coordinator.h"
#include "evo/evo.grpc.pb.h"
#include "refusal_log.h"
#include "token_gate.h"

namespace evo {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  explicit CoordinatorService(Coordinator& coordinator, security::TokenGate gate = security::TokenGate())
      : coordinator_(coordinator), gate_(std::move(gate)) {}
  // Ends open WatchRun streams (at shutdown).
  void stop_streams();
  // Logs how many refused calls were only counted since the last line (evod calls it periodically).
  void flush_refusal_log() { refusals_.flush(); }

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::Status LeaseCandidates(grpc::ServerContext*, const v1::LeaseRequest*, v1::LeaseResponse*) override;
  grpc::Status ReportResult(grpc::ServerContext*, const v1::ReportRequest*, v1::ReportResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;
  grpc::Status SubmitRun(grpc::ServerContext*, const v1::SubmitRunRequest*, v1::Run*) override;
  grpc::Status GetRun(grpc::ServerContext*, const v1::RunRef*, v1::RunStatus*) override;
  grpc::Status WatchRun(grpc::ServerContext*, const v1::RunRef*, grpc::ServerWriter<v1::RunStatus>*) override;
  grpc::Status ListRuns(grpc::ServerContext*, const v1::ListRunsRequest*, v1::ListRunsResponse*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*, v1::ListWorkersResponse*) override;
  grpc::Status ListCandidates(grpc::ServerContext*, const v1::ListCandidatesRequest*,
                              v1::ListCandidatesResponse*) override;
  grpc::Status Leaderboard(grpc::ServerContext*, const v1::LeaderboardRequest*, v1::LeaderboardResponse*) override;
  grpc::Status CancelRun(grpc::ServerContext*, const v1::RunRef*, v1::Run*) override;
  grpc::Status ExportBest(grpc::ServerContext*, const v1::ExportRequest*, v1::ExportResponse*) override;

 private:
  // The token gate, then the request's limits, then fn; failures become one status line.
  template <typename Request, typename Fn>
  grpc::Status serve(const char* rpc, grpc::ServerContext* context, const Request& request, Fn&& fn);

  Coordinator& coordinator_;
  security::TokenGate gate_;
  security::RefusalLog refusals_;  // refused calls, logged without a flood
  std::atomic<bool> stopping_{false};
};

}  // namespace evo
