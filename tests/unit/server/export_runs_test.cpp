// ExportBest over several runs: each run's winner serves that run's shapes in one dispatch table;
// unknown runs, runs without elites, mixed templates and shapes claimed twice are refused with the
// right code, and no export, good or refused, changes the database.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "coordinator.h"
#include "export_runs.h"
#include "genome_proto.h"
#include "rpc_fixture.h"
#include "store.h"
#include "test_db.h"

namespace evo {
namespace {

using Code = CoordinatorError::Code;
constexpr const char* kClass = "sm_90a/Fake GPU";

// A fake measurement: the time depends on the genome and the shape, so different shape buckets
// can crown different genomes.
double fake_us(const std::string& genome, const v1::Shape& s) {
  const std::string key = genome + "@" + std::to_string(s.batch()) + "/" + std::to_string(s.causal());
  return 5.0 + static_cast<double>(std::hash<std::string>{}(key) % 1000) / 100.0;
}

class ExportRunsTest : public ::testing::Test {
 protected:
  ExportRunsTest() : store_(dir_.file("evo.db")), coord_(store_, CoordinatorOptions{}) {
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    *req.mutable_device() = test::test_device();
    const auto registered = coord_.register_worker(req);
    worker_ = registered.worker_id();
    credential_ = registered.credential();
  }

  std::string submit(const std::vector<std::string>& shapes, uint64_t rng = 3) {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    for (const auto& s : shapes) req.add_shapes(s);
    req.set_generations(1);
    req.set_population(4);
    req.set_top_k(2);
    req.set_rng_seed(rng);
    return coord_.submit(req).run_id();
  }

  // Leases and reports until nothing is left; every candidate passes with per-shape figures.
  void drive(bool estimated = false) {
    for (int idle = 0; idle < 2;) {
      v1::LeaseRequest lr;
      lr.set_worker_id(worker_);
      lr.set_credential(credential_);
      lr.set_max_candidates(4);
      auto granted = coord_.lease(lr);
      idle = granted.leases().empty() ? idle + 1 : 0;
      for (const auto& l : granted.leases()) {
        v1::ReportRequest r;
        r.set_worker_id(worker_);
        r.set_credential(credential_);
        r.set_lease_id(l.lease_id());
        v1::Evaluation& e = *r.mutable_evaluation();
        e.set_status(v1::OK);
        e.set_estimated(estimated);
        *e.mutable_device() = test::test_device();
        double product = 1.0;
        for (const auto& s : l.shapes()) {
          auto* res = e.add_shapes();
          *res->mutable_shape() = s;
          res->set_median_us(fake_us(l.genome(), s));
          res->set_repeats(100);
          product *= res->median_us();
        }
        e.set_fitness_us(std::pow(product, 1.0 / std::max(1, l.shapes_size())));
        coord_.report(r);
      }
    }
  }

  std::string top_genome(const std::string& run_id) {
    v1::LeaderboardRequest lr;
    lr.set_run_id(run_id);
    lr.set_top(1);
    auto board = coord_.leaderboard(lr);
    return board.elites_size() ? board.elites(0).genome() : "";
  }

  Code refusal(const std::vector<std::string>& ids) {
    const std::string before = store_.dump();
    Code code = Code::kInvalidArgument;
    bool thrown = false;
    try {
      export_runs(coord_, ids);
    } catch (const CoordinatorError& e) {
      code = e.code();
      thrown = true;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    EXPECT_TRUE(thrown) << "the export was not refused";
    EXPECT_TRUE(store_.dump() == before) << "a refused export changed the database";
    return code;
  }

  test::TempDir dir_;
  Store store_;
  Coordinator coord_;
  std::string worker_, credential_;
};

TEST_F(ExportRunsTest, TwoRunsMakeOneTableWhoseBucketsAreEachRunsWinner) {
  const std::string a = submit({"1x8x512x64", "1x8x512x64:causal"});
  const std::string b = submit({"2x16x1024x128"});
  drive();
  ASSERT_FALSE(top_genome(a).empty());
  ASSERT_FALSE(top_genome(b).empty());
  const std::string before = store_.dump();

  const v1::ExportResponse r = export_runs(coord_, {a, b});

  EXPECT_TRUE(store_.dump() == before) << "an export changed the database";
  ASSERT_EQ(r.buckets_size(), 2);
  EXPECT_EQ(r.buckets(0).run_id(), a);
  EXPECT_EQ(r.buckets(0).genome(), top_genome(a));
  EXPECT_EQ(std::vector<std::string>(r.buckets(0).shapes().begin(), r.buckets(0).shapes().end()),
            (std::vector<std::string>{"1x8x512x64", "1x8x512x64:causal"}));
  EXPECT_EQ(r.buckets(1).run_id(), b);
  EXPECT_EQ(r.buckets(1).genome(), top_genome(b));
  for (const auto& bucket : r.buckets()) EXPECT_EQ(genome_from_proto(bucket.typed_genome()).text(), bucket.genome());
  ASSERT_EQ(r.buckets(1).shapes_size(), 1);
  EXPECT_EQ(r.buckets(1).shapes(0), "2x16x1024x128");
  EXPECT_GT(r.buckets(1).fitness_us(), 0);
  EXPECT_EQ(r.genome(), top_genome(a) + ";" + top_genome(b));
  // Both variants, and the bucket rows (batch, heads, heads_kv, seq_q, seq_k, head_dim, causal,
  // dtype, variant) that route each run's shapes to its winner.
  EXPECT_NE(r.source().find("struct Variant0"), std::string::npos);
  EXPECT_NE(r.source().find("struct Variant1"), std::string::npos);
  EXPECT_NE(r.source().find("{1, 8, 8, 512, 512, 64, 0, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(r.source().find("{1, 8, 8, 512, 512, 64, 1, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(r.source().find("{2, 16, 16, 1024, 1024, 128, 0, 0, 0, 1},"), std::string::npos);
  // The report lists each bucket with its run, shapes, genome and figures; nothing is estimated.
  EXPECT_NE(r.report().find("## Buckets"), std::string::npos);
  EXPECT_NE(r.report().find("| 0 | " + a + " | `1x8x512x64`, `1x8x512x64:causal` | `" + top_genome(a)),
            std::string::npos)
      << r.report();
  EXPECT_NE(r.report().find("| 1 | " + b + " | `2x16x1024x128` | `" + top_genome(b)), std::string::npos);
  EXPECT_NE(r.report().find("measured on Fake GPU"), std::string::npos);
  EXPECT_EQ(r.report().find("ESTIMATED"), std::string::npos);
}

TEST_F(ExportRunsTest, OneRunStillExportsItsWinnerAlone) {
  const std::string a = submit({"1x8x512x64"});
  drive();
  const v1::ExportResponse r = export_runs(coord_, {a});
  ASSERT_EQ(r.buckets_size(), 1);
  EXPECT_EQ(r.genome(), top_genome(a));
  EXPECT_EQ(r.source().find("struct Variant1"), std::string::npos);
  EXPECT_EQ(r.report().find("## Buckets"), std::string::npos) << "a standalone export has no bucket table";
}

TEST_F(ExportRunsTest, UnknownRunIsNotFound) {
  const std::string a = submit({"1x8x512x64"});
  drive();
  EXPECT_EQ(refusal({a, "r-does-not-exist"}), Code::kNotFound);
}

TEST_F(ExportRunsTest, RunWithoutAnEliteIsAFailedPrecondition) {
  const std::string a = submit({"1x8x512x64"});
  drive();
  const std::string pending = submit({"2x8x512x64"}, 9);  // submitted after the drive: no result yet
  EXPECT_EQ(refusal({a, pending}), Code::kFailedPrecondition);
}

// The refusal says "yet" only of a run that may still find one.
TEST_F(ExportRunsTest, ARunWithoutAnEliteIsNamedAsEndedOrPending) {
  const std::string pending = submit({"2x8x512x64"}, 9);
  auto message = [&](const std::string& run) -> std::string {
    try {
      export_runs(coord_, {run});
    } catch (const CoordinatorError& e) {
      return e.what();
    }
    return "exported";
  };
  EXPECT_EQ(message(pending), "run '" + pending + "' has no confirmed elite yet");
  coord_.cancel(pending);
  EXPECT_EQ(message(pending), "run '" + pending + "' has no confirmed elite");
}

TEST_F(ExportRunsTest, AShapeInTwoRunsIsInvalid) {
  const std::string a = submit({"1x8x512x64", "2x8x512x64:causal"});
  const std::string b = submit({"2x8x512x64:causal"}, 5);
  drive();
  EXPECT_EQ(refusal({a, b}), Code::kInvalidArgument);
  // The same shapes without the causal flag are other shapes: no conflict.
  const std::string c = submit({"2x8x512x64"}, 6);
  drive();
  EXPECT_EQ(export_runs(coord_, {a, c}).buckets_size(), 2);
}

TEST_F(ExportRunsTest, WinnersOfDifferentTemplatesAreInvalid) {
  const std::string a = submit({"1x8x512x64"});
  drive();
  Coordinator::Best first = coord_.best_of(a);
  Coordinator::Best other = first;
  other.run.id = "r-other";
  other.run.seed = "fp8_stage_c";
  other.run.shapes = {"4x8x512x64"};
  try {
    dispatch_variants({first, other});
    FAIL() << "mixed templates were accepted";
  } catch (const CoordinatorError& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("different templates"), std::string::npos) << e.what();
  }
}

TEST_F(ExportRunsTest, AnEstimatedRunIsFlaggedLoudly) {
  const std::string a = submit({"1x8x512x64"});
  drive();
  Coordinator::Best measured = coord_.best_of(a);
  Coordinator::Best estimated = measured;
  estimated.run.id = "r-estimated";
  estimated.run.shapes = {"16x16x512x64"};
  estimated.evaluation.evaluation.set_estimated(true);
  const v1::ExportResponse r = export_dispatch_table(dispatch_variants({measured, estimated}));
  EXPECT_FALSE(r.buckets(0).estimated());
  EXPECT_TRUE(r.buckets(1).estimated());
  EXPECT_NE(r.report().find("**ESTIMATED (model evaluator, no GPU)** for bucket(s) 1 (run r-estimated)"),
            std::string::npos)
      << r.report();
  EXPECT_NE(r.report().find("| 1 | r-estimated | `16x16x512x64` |"), std::string::npos);
  EXPECT_NE(r.source().find("run r-estimated: "), std::string::npos);
}

TEST(ExportRunIds, RunIdThenRunIdsEachOnce) {
  v1::ExportRequest req;
  req.set_run_id("r-a");
  req.add_run_ids("r-b");
  EXPECT_EQ(export_run_ids(req), (std::vector<std::string>{"r-a", "r-b"}));
  req.add_run_ids("r-a");
  EXPECT_THROW(export_run_ids(req), CoordinatorError);
  EXPECT_THROW(export_run_ids(v1::ExportRequest()), CoordinatorError);
}

// Through evod's gRPC edge: the status codes, and the limits on run_ids.
TEST(ExportBestRpc, SeveralRunsStatusCodes) {
  test::InProcessEvod evod;
  ASSERT_TRUE(evod.started());
  auto stub = evod.stub();
  v1::SubmitRunRequest submit;
  submit.set_seed("fa_s512_v3");
  submit.set_population(4);
  submit.set_generations(1);
  submit.set_top_k(2);
  v1::Run run;
  const grpc::Status submitted = stub->SubmitRun(test::context().get(), submit, &run);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  auto call = [&](const std::vector<std::string>& ids) {
    v1::ExportRequest req;
    for (const auto& id : ids) req.add_run_ids(id);
    v1::ExportResponse resp;
    const std::string before = evod.store().dump();
    grpc::Status s = stub->ExportBest(test::context().get(), req, &resp);
    EXPECT_TRUE(evod.store().dump() == before);
    return s.error_code();
  };
  EXPECT_EQ(call({}), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call({run.run_id(), "r-nope"}), grpc::StatusCode::FAILED_PRECONDITION) << "the first run is checked first";
  EXPECT_EQ(call({"r-nope", run.run_id()}), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(call({run.run_id(), run.run_id()}), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call({"r-a", ""}), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(std::vector<std::string>(65, "r-a")), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace evo
