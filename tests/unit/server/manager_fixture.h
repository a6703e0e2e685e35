#pragma once
// The coordinator's managers over one store, wired as the Coordinator wires them, with a clock the
// test moves by hand: for tests of one manager's own contract.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "lease_scheduler.h"
#include "run_lifecycle.h"
#include "store.h"
#include "template_registry.h"
#include "test_db.h"
#include "worker_registry.h"

namespace evo::test {

inline v1::DeviceInfo fake_device(const std::string& device_class, bool estimated = false) {
  v1::DeviceInfo d;
  d.set_gpu_name("Fake GPU");
  d.set_arch("sm_90a");
  d.set_device_class(device_class);
  d.set_nvrtc_version("12.8");
  d.set_cuda_version("12.8");
  d.set_backend(estimated ? "model" : "cuda");
  for (auto& f : template_fingerprints()) d.add_template_fingerprints(std::move(f));
  return d;
}

class ManagerTest : public ::testing::Test {
 protected:
  // Workers heartbeat every 300 ms (a third of the TTL) and stay live for three intervals.
  static constexpr int kTtlMs = 900;
  static constexpr int kLiveMs = 900;

  ManagerTest()
      : store_(dir_.file("evo.db")),
        workers_(store_, kTtlMs, clock()),
        runs_(store_, clock()),
        leases_(store_, workers_, runs_, kTtlMs, clock()) {}

  Clock clock() {
    return [this] { return now_; };
  }

  // fn inside one transaction, as the managers' callers run it.
  template <typename Fn>
  auto in_transaction(Fn&& fn) {
    decltype(fn()) out{};
    store_.transaction([&] { out = fn(); });
    return out;
  }

  std::string add_worker(const std::string& device_class, bool estimated = false,
                         const std::string& enrolment_key = "") {
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    req.set_enrolment_key(enrolment_key);
    *req.mutable_device() = fake_device(device_class, estimated);
    const auto registered = workers_.register_worker(req);
    credentials_[registered.worker_id()] = registered.credential();
    return registered.worker_id();
  }

  RunRecord submit(int generations, int population, int top_k, uint64_t rng = 7, const std::string& shape = "") {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    if (!shape.empty()) req.add_shapes(shape);
    req.set_generations(generations);
    req.set_population(population);
    req.set_top_k(top_k);
    req.set_rng_seed(rng);
    return runs_.submit(req);
  }

  v1::LeaseResponse lease(const std::string& worker, int n = 1) {
    v1::LeaseRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_max_candidates(n);
    return leases_.lease(req);
  }

  v1::ReportResponse report(const std::string& worker, const v1::Lease& lease, const std::string& device_class,
                            double fitness_us, bool estimated = false) {
    v1::Evaluation e;
    e.set_status(v1::OK);
    e.set_fitness_us(fitness_us);
    e.set_estimated(estimated);
    *e.mutable_device() = fake_device(device_class, estimated);
    return report_evaluation(worker, lease, std::move(e));
  }
  // The worker's report of `e` on its lease, with its credential.
  v1::ReportResponse report_evaluation(const std::string& worker, const v1::Lease& lease, v1::Evaluation e) {
    v1::ReportRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_lease_id(lease.lease_id());
    *req.mutable_evaluation() = std::move(e);
    return leases_.report(req);
  }

  TempDir dir_;
  Store store_;
  int64_t now_ = 1'000'000;
  WorkerRegistry workers_;
  RunLifecycle runs_;
  LeaseScheduler leases_;
  std::map<std::string, std::string> credentials_;  // worker id -> the credential its registration got
};

}  // namespace evo::test
