#pragma once
// One evod process on loopback, started with the arguments a test needs, and the few calls the
// fault tests make to it as a fake worker or a user.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process_harness.h"
#include "template_registry.h"

namespace evo::fault {

inline constexpr const char* kDeviceClass = "sm_90a/model/estimated";

// One evod on loopback with its own arguments, and the calls the tests make to it.
class Evod {
 public:
  // port 0: a free one.
  Evod(const std::string& db, const std::string& log, std::vector<std::string> extra = {}, int port = 0)
      : address_("127.0.0.1:" + std::to_string(port ? port : it::free_port())) {
    std::vector<std::string> argv{EVOD_BIN, "serve", "--db", db, "--listen", address_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<it::Process>(argv, log);
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stub_ = v1::Coordinator::NewStub(channel);
  }
  it::Process& process() { return *process_; }

  grpc::Status submit(int population, const char* strategy, uint64_t rng_seed, v1::Run* run = nullptr) {
    v1::SubmitRunRequest req = it::run_request(1, population, 1, rng_seed);
    req.set_strategy(strategy);
    v1::Run ignored;
    grpc::ClientContext ctx;
    return stub_->SubmitRun(&ctx, req, run ? run : &ignored);
  }
  // The worker's id; its credential goes with every later call of the worker.
  std::string register_worker() {
    v1::RegisterWorkerRequest req;
    req.set_name("fake");
    req.mutable_device()->set_device_class(kDeviceClass);
    req.mutable_device()->set_backend("model");
    for (auto& f : template_fingerprints()) req.mutable_device()->add_template_fingerprints(std::move(f));
    v1::RegisterWorkerResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->RegisterWorker(&ctx, req, &resp).ok());
    credentials_[resp.worker_id()] = resp.credential();
    return resp.worker_id();
  }
  grpc::Status lease(const std::string& worker, int n, v1::LeaseResponse* resp) {
    v1::LeaseRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_max_candidates(n);
    grpc::ClientContext ctx;
    return stub_->LeaseCandidates(&ctx, req, resp);
  }
  grpc::Status report(const std::string& worker, const std::string& lease_id) {
    v1::ReportRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_lease_id(lease_id);
    req.mutable_evaluation()->set_status(v1::OK);
    req.mutable_evaluation()->set_fitness_us(12.5);
    req.mutable_evaluation()->set_estimated(true);
    req.mutable_evaluation()->mutable_device()->set_device_class(kDeviceClass);
    v1::ReportResponse resp;
    grpc::ClientContext ctx;
    return stub_->ReportResult(&ctx, req, &resp);
  }
  grpc::Status heartbeat(const std::string& worker, const std::string& lease_id, v1::HeartbeatResponse* resp) {
    v1::HeartbeatRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.add_lease_ids(lease_id);
    grpc::ClientContext ctx;
    return stub_->Heartbeat(&ctx, req, resp);
  }
  const std::string& address() const { return address_; }
  grpc::Status get_run(const std::string& run_id) {
    v1::RunRef ref;
    ref.set_run_id(run_id);
    v1::RunStatus st;
    grpc::ClientContext ctx;
    return stub_->GetRun(&ctx, ref, &st);
  }

 private:
  std::string address_;
  std::unique_ptr<it::Process> process_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  // worker id -> credential; shared by every Evod of the test, as the database is across restarts
  static inline std::map<std::string, std::string> credentials_;
};

}  // namespace evo::fault
