#include "coordinator_link.h"

#include <algorithm>
#include <chrono>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

namespace evo {

namespace {
constexpr int kFirstBackoffMs = 100;
constexpr int kMaxBackoffMs = 5000;
constexpr int kRpcDeadlineMs = 10000;
// The channel's own reconnect backoff (gRPC's default grows to 120 s): capped, so that a worker
// reaches evod within seconds of its return, inside the grace evod gives leases after an outage
// (server::kReconnectGraceMs).
constexpr int kMaxReconnectBackoffMs = 5000;

bool transient(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}
}  // namespace

CoordinatorLink::CoordinatorLink(const std::string& address, const std::atomic<bool>& stop,
                                 security::ClientSecurity security)
    : address_(address), stop_(stop), security_(std::move(security)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kFirstBackoffMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kFirstBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  stub_ = v1::Coordinator::NewStub(
      grpc::CreateCustomChannel(address, security::channel_credentials(security_), args));
}

void CoordinatorLink::prepare(grpc::ClientContext& ctx) const {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(kRpcDeadlineMs));
  security::attach_token(ctx, security_);
}

void CoordinatorLink::mark(bool reachable, const grpc::Status& status) {
  int now = reachable ? 1 : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (now == state_) return;
  if (reachable)
    spdlog::info("event=coordinator_reachable coordinator={}", address_);
  else
    spdlog::warn("event=coordinator_unreachable coordinator={} error=\"{}\" retrying with backoff", address_,
                 status.error_message());
  state_ = now;
}

void CoordinatorLink::sleep_for(int ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_.load(); });
}

void CoordinatorLink::wake() { cv_.notify_all(); }

template <typename Call>
bool CoordinatorLink::with_retries(const char* rpc, Call&& call, grpc::Status* error) {
  // The first try is made even when stopping, so that a finished evaluation still gets reported.
  int backoff = kFirstBackoffMs;
  for (;;) {
    grpc::Status s = call();
    if (s.ok()) {
      mark(true, s);
      return true;
    }
    if (!transient(s)) {
      mark(true, s);  // evod answered, even if with an error
      if (error) *error = s;
      return false;
    }
    mark(false, s);
    if (stop_) break;
    sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxBackoffMs);
  }
  if (error) *error = grpc::Status(grpc::StatusCode::CANCELLED, std::string(rpc) + ": stopping");
  return false;
}

std::optional<v1::RegisterWorkerResponse> CoordinatorLink::register_worker(const v1::RegisterWorkerRequest& req) {
  v1::RegisterWorkerResponse resp;
  grpc::Status error;
  bool ok = with_retries("RegisterWorker", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->RegisterWorker(&ctx, req, &resp);
  }, &error);
  if (!ok) {
    if (!stop_) spdlog::error("event=register_failed error=\"{}\"", error.error_message());
    return std::nullopt;
  }
  return resp;
}

std::optional<v1::LeaseResponse> CoordinatorLink::lease(const v1::LeaseRequest& req, grpc::Status* error) {
  v1::LeaseResponse resp;
  bool ok = with_retries("LeaseCandidates", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->LeaseCandidates(&ctx, req, &resp);
  }, error);
  return ok ? std::optional<v1::LeaseResponse>(resp) : std::nullopt;
}

std::optional<v1::ReportResponse> CoordinatorLink::report(const v1::ReportRequest& req, grpc::Status* error) {
  v1::ReportResponse resp;
  bool ok = with_retries("ReportResult", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->ReportResult(&ctx, req, &resp);
  }, error);
  return ok ? std::optional<v1::ReportResponse>(resp) : std::nullopt;
}

std::optional<v1::HeartbeatResponse> CoordinatorLink::heartbeat(const v1::HeartbeatRequest& req,
                                                                grpc::Status* error) {
  v1::HeartbeatResponse resp;
  grpc::ClientContext ctx;
  prepare(ctx);
  grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
  if (!s.ok()) {
    if (error) *error = s;
    return std::nullopt;
  }
  return resp;
}

}  // namespace evo
