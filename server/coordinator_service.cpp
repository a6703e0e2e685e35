#include "coordinator_service.h"

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "errors.h"
#include "export_runs.h"
#include "request_limits.h"

namespace evo {

namespace {

// Runs fn and maps every failure to one status with one line of message.
template <typename Fn>
grpc::Status guarded(const char* rpc, Fn&& fn) {
  try {
    fn();
    return grpc::Status::OK;
  } catch (const CoordinatorError& e) {
    switch (e.code()) {
      case CoordinatorError::Code::kInvalidArgument:
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
      case CoordinatorError::Code::kNotFound:
        return grpc::Status(grpc::StatusCode::NOT_FOUND, e.what());
      case CoordinatorError::Code::kFailedPrecondition:
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
      case CoordinatorError::Code::kPermissionDenied:
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, e.what());
    }
    return grpc::Status(grpc::StatusCode::UNKNOWN, e.what());
  } catch (const InputError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const CallerGone& e) {
    spdlog::info("event=lease_withdrawn rpc={} reason=\"{}\"", rpc, e.what());
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, std::string(rpc) + ": " + e.what());
  } catch (const StoreError& e) {
    // A storage fault is the operator's to fix, not a bug: the Store logged it once when it began;
    // the caller learns what it is from the code (a full disk is RESOURCE_EXHAUSTED; a read-only,
    // vanished, corrupt or failing file UNAVAILABLE, which workers retry with backoff).
    switch (e.fault()) {
      case StoreFault::kFull:
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(rpc) + ": storage full: " + e.what());
      case StoreFault::kReadOnly:
      case StoreFault::kUnavailable:
      case StoreFault::kCorrupt:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            std::string(rpc) + ": storage " + to_string(e.fault()) + ": " + e.what());
      case StoreFault::kOther:
        break;
    }
    spdlog::error("event=rpc_failed rpc={} error=\"{}\"", rpc, e.what());
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rpc) + ": " + e.what());
  } catch (const std::exception& e) {
    spdlog::error("event=rpc_failed rpc={} error=\"{}\"", rpc, e.what());
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rpc) + ": " + e.what());
  }
}

}  // namespace

template <typename Request, typename Fn>
grpc::Status CoordinatorService::serve(const char* rpc, grpc::ServerContext* context, const Request& request,
                                       Fn&& fn) {
  grpc::Status admitted = gate_.check(*context);
  if (!admitted.ok()) {
    refusals_.refused(rpc, context->peer(), admitted.error_message());
    return admitted;
  }
  return guarded(rpc, [&] {
    limits::check_request(request);
    fn();
  });
}

void CoordinatorService::stop_streams() {
  stopping_ = true;
  coordinator_.wake_all();
}

grpc::Status CoordinatorService::RegisterWorker(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                                                v1::RegisterWorkerResponse* resp) {
  return serve("RegisterWorker", ctx, *req, [&] { *resp = coordinator_.register_worker(*req); });
}

grpc::Status CoordinatorService::LeaseCandidates(grpc::ServerContext* ctx, const v1::LeaseRequest* req,
                                                 v1::LeaseResponse* resp) {
  // A caller that gave up (deadline passed, cancelled) would never receive its leases.
  auto caller_waits = [ctx] { return !ctx->IsCancelled() && std::chrono::system_clock::now() < ctx->deadline(); };
  return serve("LeaseCandidates", ctx, *req, [&] { *resp = coordinator_.lease(*req, caller_waits); });
}

grpc::Status CoordinatorService::ReportResult(grpc::ServerContext* ctx, const v1::ReportRequest* req,
                                              v1::ReportResponse* resp) {
  return serve("ReportResult", ctx, *req, [&] { *resp = coordinator_.report(*req); });
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  return serve("Heartbeat", ctx, *req, [&] { *resp = coordinator_.heartbeat(*req); });
}

grpc::Status CoordinatorService::SubmitRun(grpc::ServerContext* ctx, const v1::SubmitRunRequest* req, v1::Run* resp) {
  return serve("SubmitRun", ctx, *req, [&] { *resp = coordinator_.submit(*req); });
}

grpc::Status CoordinatorService::GetRun(grpc::ServerContext* ctx, const v1::RunRef* req, v1::RunStatus* resp) {
  return serve("GetRun", ctx, *req, [&] { *resp = coordinator_.status(req->run_id()); });
}

grpc::Status CoordinatorService::WatchRun(grpc::ServerContext* ctx, const v1::RunRef* req,
                                          grpc::ServerWriter<v1::RunStatus>* writer) {
  return serve("WatchRun", ctx, *req, [&] {
    while (!ctx->IsCancelled() && !stopping_) {
      uint64_t seen = coordinator_.change_count();
      // One computation per change, shared by every watcher of the run.
      v1::RunStatus st = coordinator_.watched_status(req->run_id());
      // Changes, at most one status every kWatchMinIntervalMs, and at least one a period (elapsed
      // and ETA move even when nothing else does).
      const auto sent = std::chrono::steady_clock::now();
      if (!writer->Write(st)) return;
      auto state = st.run().state();
      if (state == v1::DONE || state == v1::CANCELLED || state == v1::FAILED) return;
      coordinator_.wait_for_change(seen, server::kWatchIntervalMs);
      std::this_thread::sleep_until(sent + std::chrono::milliseconds(server::kWatchMinIntervalMs));
    }
  });
}

grpc::Status CoordinatorService::ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest* req,
                                          v1::ListRunsResponse* resp) {
  return serve("ListRuns", ctx, *req, [&] { *resp = coordinator_.list_runs(); });
}

grpc::Status CoordinatorService::ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest* req,
                                             v1::ListWorkersResponse* resp) {
  return serve("ListWorkers", ctx, *req, [&] { *resp = coordinator_.list_workers(*req); });
}

grpc::Status CoordinatorService::ListCandidates(grpc::ServerContext* ctx, const v1::ListCandidatesRequest* req,
                                                v1::ListCandidatesResponse* resp) {
  return serve("ListCandidates", ctx, *req, [&] { *resp = coordinator_.list_candidates(*req); });
}

grpc::Status CoordinatorService::Leaderboard(grpc::ServerContext* ctx, const v1::LeaderboardRequest* req,
                                             v1::LeaderboardResponse* resp) {
  return serve("Leaderboard", ctx, *req, [&] { *resp = coordinator_.leaderboard(*req); });
}

grpc::Status CoordinatorService::CancelRun(grpc::ServerContext* ctx, const v1::RunRef* req, v1::Run* resp) {
  return serve("CancelRun", ctx, *req, [&] { *resp = coordinator_.cancel(req->run_id()); });
}

grpc::Status CoordinatorService::ExportBest(grpc::ServerContext* ctx, const v1::ExportRequest* req,
                                            v1::ExportResponse* resp) {
  return serve("ExportBest", ctx, *req, [&] {
    ExportOptions options;
    if (!req->source_name().empty()) options.source_name = req->source_name();
    *resp = export_runs(coordinator_, export_run_ids(*req), options);
  });
}

}  // namespace evo
