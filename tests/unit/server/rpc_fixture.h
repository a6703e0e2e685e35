#pragma once
// evod in-process for tests at the gRPC edge: a fresh database, the coordinator, the service with
// an optional token, and the gRPC server built exactly as evod builds it (receive limit, TLS), on a
// free loopback port. Calls go through a real channel, so size limits and metadata are real.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "coordinator.h"
#include "coordinator_service.h"
#include "evo/evo.grpc.pb.h"
#include "grpc_server.h"
#include "store.h"
#include "template_registry.h"
#include "test_db.h"
#include "token_gate.h"

namespace evo::test {

inline v1::DeviceInfo test_device() {
  v1::DeviceInfo d;
  d.set_gpu_name("Fake GPU");
  d.set_arch("sm_90a");
  d.set_device_class("sm_90a/Fake GPU");
  d.set_nvrtc_version("12.8");
  d.set_cuda_version("12.8");
  d.set_backend("cuda");
  for (auto& f : template_fingerprints()) d.add_template_fingerprints(std::move(f));
  return d;
}

class InProcessEvod {
 public:
  explicit InProcessEvod(const std::string& token = "", GrpcServerConfig config = {})
      : store_(dir_.file("evo.db")), coordinator_(store_, CoordinatorOptions{}),
        service_(coordinator_, security::TokenGate(token)) {
    config.listen = "127.0.0.1:0";
    server_ = start_grpc_server(service_, config, &port_);
  }
  ~InProcessEvod() {
    service_.stop_streams();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  bool started() const { return server_ != nullptr; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  Store& store() { return store_; }
  const std::string& dir() const { return dir_.path(); }

  std::unique_ptr<v1::Coordinator::Stub> stub(
      std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials()) const {
    return v1::Coordinator::NewStub(grpc::CreateChannel(address(), credentials));
  }

 private:
  TempDir dir_;
  Store store_;
  Coordinator coordinator_;
  CoordinatorService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A client context with a deadline (a test never hangs) and, when given, the token.
inline std::unique_ptr<grpc::ClientContext> context(const std::string& authorization = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
  return ctx;
}

}  // namespace evo::test
