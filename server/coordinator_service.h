#pragma once
// The Coordinator gRPC service: each RPC is a thin call into Coordinator, with its errors turned
// into status codes (InputError/kInvalidArgument -> INVALID_ARGUMENT, kNotFound -> NOT_FOUND,
// kFailedPrecondition -> FAILED_PRECONDITION, a full disk or size cap -> RESOURCE_EXHAUSTED, a
// read-only, removed or failing database file -> UNAVAILABLE, anything else -> INTERNAL).
#include <atomic>

#include "coordinator.h"
#include "evo/evo.grpc.pb.h"

namespace evo {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  explicit CoordinatorService(Coordinator& coordinator) : coordinator_(coordinator) {}
  // Ends open WatchRun streams (at shutdown).
  void stop_streams();

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::Status LeaseCandidates(grpc::ServerContext*, const v1::LeaseRequest*, v1::LeaseResponse*) override;
  grpc::Status ReportResult(grpc::ServerContext*, const v1::ReportRequest*, v1::ReportResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;
  grpc::Status SubmitRun(grpc::ServerContext*, const v1::SubmitRunRequest*, v1::Run*) override;
  grpc::Status GetRun(grpc::ServerContext*, const v1::RunRef*, v1::RunStatus*) override;
  grpc::Status WatchRun(grpc::ServerContext*, const v1::RunRef*, grpc::ServerWriter<v1::RunStatus>*) override;
  grpc::Status ListRuns(grpc::ServerContext*, const v1::ListRunsRequest*, v1::ListRunsResponse*) override;
  grpc::Status Leaderboard(grpc::ServerContext*, const v1::LeaderboardRequest*, v1::LeaderboardResponse*) override;
  grpc::Status CancelRun(grpc::ServerContext*, const v1::RunRef*, v1::Run*) override;
  grpc::Status ExportBest(grpc::ServerContext*, const v1::ExportRequest*, v1::ExportResponse*) override;

 private:
  Coordinator& coordinator_;
  std::atomic<bool> stopping_{false};
};

}  // namespace evo
