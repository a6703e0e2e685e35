// A lying worker beside two honest ones (issue 38): evod and two evo-worker processes (model
// backend) on loopback, and a raw gRPC client that holds the shared token (none here), registers
// as a worker of their class and lies in every report. Its times reach no elite, export, status or
// result cache; it cannot act as another worker; its peers outvote it and evod quarantines it.
#include <gtest/gtest.h>

#include <thread>

#include "process_harness.h"
#include "store_sqlite.h"
#include "template_registry.h"

namespace evo::it {
namespace {

constexpr const char* kModelClass = "sm_90a/model/estimated";
// Faster than any honest estimate of 1x8x512x64, and above the device's physical floor: only the
// confirmation by peers can tell it from a fast kernel.
constexpr double kLieUs = 1.5;

class Liar {
 public:
  explicit Liar(v1::Coordinator::Stub& stub) : stub_(stub) {
    v1::RegisterWorkerRequest req;
    req.set_name("rogue");
    auto* d = req.mutable_device();
    d->set_gpu_name("model:H100-SXM");
    d->set_arch("sm_90a");
    d->set_backend("model");
    d->set_device_class(kModelClass);
    for (auto& f : template_fingerprints()) d->add_template_fingerprints(std::move(f));
    grpc::ClientContext ctx;
    v1::RegisterWorkerResponse resp;
    EXPECT_TRUE(stub_.RegisterWorker(&ctx, req, &resp).ok());
    id = resp.worker_id();
    credential = resp.credential();
  }

  grpc::Status lease(const std::string& as, const std::string& with, v1::LeaseResponse* resp) {
    grpc::ClientContext ctx;
    v1::LeaseRequest req;
    req.set_worker_id(as);
    req.set_credential(with);
    req.set_max_candidates(2);
    return stub_.LeaseCandidates(&ctx, req, resp);
  }

  // Every trick at once: OK whatever the genome, a time no kernel reaches, "estimated" set.
  grpc::Status report(const v1::Lease& l, double us) {
    grpc::ClientContext ctx;
    v1::ReportRequest req;
    req.set_worker_id(id);
    req.set_credential(credential);
    req.set_lease_id(l.lease_id());
    auto* e = req.mutable_evaluation();
    e->set_status(v1::OK);
    e->set_fitness_us(us);
    e->set_estimated(true);
    for (const auto& shape : l.shapes()) {
      auto* s = e->add_shapes();
      *s->mutable_shape() = shape;
      s->set_median_us(us);
    }
    v1::ReportResponse resp;
    return stub_.ReportResult(&ctx, req, &resp);
  }

  std::string id, credential;

 private:
  v1::Coordinator::Stub& stub_;
};

TEST(RogueWorker, ALiarBesideTwoHonestWorkersReachesNoEliteExportStatusOrCacheAndIsQuarantined) {
  Cluster c;
  // A long lease (and so a long liveness window): on a loaded machine a busy honest worker must
  // stay live, or a disagreement it should settle is settled without it.
  c.start_evod(10000);
  c.start_worker("honest-a");
  c.start_worker("honest-b");
  Liar liar(c.client());
  ASSERT_TRUE(eventually(60, [&] {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse workers;
    return c.client().ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok() && workers.workers_size() == 3;
  }));
  v1::Run run;
  ASSERT_TRUE(c.submit(run_request(2, 8, 3, 5), &run).ok());

  // It cannot act as a worker it did not register, though ListWorkers names them.
  {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse workers;
    ASSERT_TRUE(c.client().ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok());
    for (const auto& w : workers.workers()) {
      if (w.worker_id() == liar.id) continue;
      v1::LeaseResponse stolen;
      EXPECT_EQ(liar.lease(w.worker_id(), liar.credential, &stolen).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    }
  }

  bool quarantined = false, floor_tried = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(400);
  while (std::chrono::steady_clock::now() < deadline && c.status(run.run_id()).run().state() != v1::DONE) {
    v1::LeaseResponse leases;
    if (!quarantined) {
      const grpc::Status s = liar.lease(liar.id, liar.credential, &leases);
      if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        EXPECT_NE(s.error_message().find("quarantined"), std::string::npos) << s.error_message();
        quarantined = true;
      }
    }
    for (const auto& l : leases.leases()) {
      if (!floor_tried) {  // below the floor: refused, whatever else the report says
        for (double us : {1e-9, 5e-324}) {
          const grpc::Status s = liar.report(l, us);
          EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
          EXPECT_NE(s.error_message().find("below the physical floor"), std::string::npos) << s.error_message();
        }
        floor_tried = true;
      }
      liar.report(l, kLieUs);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(c.status(run.run_id()).run().state(), v1::DONE) << c.evod().log();
  EXPECT_TRUE(floor_tried);
  EXPECT_TRUE(quarantined) << "its peers outvoted it " << c.evod().log();

  // Status and leaderboard: only what two honest workers agreed on.
  const v1::RunStatus st = c.status(run.run_id());
  EXPECT_GT(st.best_us(), 1.1 * kLieUs);
  const v1::LeaderboardResponse board = c.leaderboard(run.run_id(), 10);
  ASSERT_EQ(board.elites_size(), 3);
  for (const auto& e : board.elites()) {
    EXPECT_GT(e.fitness_us(), 1.1 * kLieUs) << e.genome();
    EXPECT_FALSE(e.self_confirmed()) << "two honest workers were live";
  }
  // The export.
  {
    grpc::ClientContext ctx;
    v1::ExportRequest req;
    req.set_run_id(run.run_id());
    v1::ExportResponse exported;
    ASSERT_TRUE(c.client().ExportBest(&ctx, req, &exported).ok());
    ASSERT_EQ(exported.buckets_size(), 1);
    EXPECT_GT(exported.buckets(0).fitness_us(), 1.1 * kLieUs);
    EXPECT_EQ(exported.buckets(0).genome(), board.elites(0).genome());
  }
  // The cache, and a later run of the same problem by another submitter, which it answers.
  {
    SqliteConnection db(c.db());
    db.exec("PRAGMA busy_timeout = 5000");
    auto s = db.prepare("SELECT COUNT(*), COALESCE(MIN(fitness_us), 0) FROM result_cache");
    ASSERT_TRUE(s.step());
    EXPECT_GT(s.column_int(0), 0) << "the honest pair's agreements are cached";
    EXPECT_GT(s.column_double(1), 1.1 * kLieUs);
  }
  v1::Run again;
  ASSERT_TRUE(c.submit(run_request(1, 8, 3, 5), &again).ok());
  ASSERT_TRUE(c.wait_done(again.run_id(), 120)) << c.evod().log();
  EXPECT_GT(c.status(again.run_id()).best_us(), 1.1 * kLieUs);
  // evoctl workers' source: the liar, quarantined, with why.
  grpc::ClientContext ctx;
  v1::ListWorkersRequest all;
  all.set_include_gone(true);
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(c.client().ListWorkers(&ctx, all, &workers).ok());
  for (const auto& w : workers.workers()) {
    EXPECT_EQ(w.quarantined().empty(), w.worker_id() != liar.id) << w.worker_id() << ": " << w.quarantined();
    if (w.worker_id() != liar.id) {
      EXPECT_EQ(w.disagreements(), 0) << w.worker_id();
    }
  }
}

}  // namespace
}  // namespace evo::it
