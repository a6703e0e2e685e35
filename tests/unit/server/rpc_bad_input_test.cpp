// Malformed, oversized and out-of-range messages to every RPC of the Coordinator service, through a
// real gRPC channel: each gets one clear status line, evod keeps serving, and the database is
// byte-for-byte what it was before the call.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <set>

#include <grpcpp/generic/generic_stub.h>

#include "rpc_fixture.h"
#include "wire_labels.h"

namespace evo {
namespace {

using Stub = v1::Coordinator::Stub;
using grpc::StatusCode;

const std::string k10MB(10u << 20, 'x');  // over the 4 MB receive limit
const std::string k1MB(1u << 20, 'x');    // under it, over every field limit

struct Case {
  std::string name;
  StatusCode expected;
  std::function<grpc::Status(Stub&)> call;
};

class RpcBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(evod_.started());
    stub_ = evod_.stub();
    worker_ = register_worker("w1");
    other_worker_ = register_worker("w2");
    v1::SubmitRunRequest submit;
    submit.set_seed("fa_s512_v3");
    submit.set_population(4);
    submit.set_generations(1);
    submit.set_top_k(2);
    ASSERT_TRUE(stub_->SubmitRun(test::context().get(), submit, &run_).ok());
    v1::LeaseRequest lr;
    lr.set_worker_id(worker_);
    lr.set_credential(credentials_[worker_]);
    v1::LeaseResponse leases;
    ASSERT_TRUE(stub_->LeaseCandidates(test::context().get(), lr, &leases).ok());
    ASSERT_EQ(leases.leases_size(), 1);
    lease_ = leases.leases(0);
  }

  std::string register_worker(const std::string& name) {
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    *req.mutable_device() = test::test_device();
    v1::RegisterWorkerResponse resp;
    EXPECT_TRUE(stub_->RegisterWorker(test::context().get(), req, &resp).ok());
    credentials_[resp.worker_id()] = resp.credential();
    return resp.worker_id();
  }

  v1::Evaluation good_evaluation() const {
    v1::Evaluation e;
    e.set_status(v1::OK);
    e.set_fitness_us(42.0);
    *e.mutable_device() = test::test_device();
    auto* s = e.add_shapes();
    s->set_median_us(42.0);
    s->set_p10_us(41.0);
    s->set_p90_us(43.0);
    s->set_repeats(100);
    return e;
  }

  v1::ReportRequest report_of(const v1::Evaluation& e) {
    v1::ReportRequest r;
    r.set_worker_id(worker_);
    r.set_credential(credentials_[worker_]);
    r.set_lease_id(lease_.lease_id());
    *r.mutable_evaluation() = e;
    return r;
  }

  // Runs every case: expected code, one short line of message, database unchanged.
  void expect_refused(const std::vector<Case>& cases) {
    for (const auto& c : cases) {
      SCOPED_TRACE(c.name);
      const std::string before = evod_.store().dump();
      grpc::Status s = c.call(*stub_);
      EXPECT_EQ(s.error_code(), c.expected) << s.error_message();
      EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << s.error_message();
      EXPECT_LT(s.error_message().size(), 400u) << "message should be one short line";
      EXPECT_FALSE(s.error_message().empty());
      EXPECT_TRUE(evod_.store().dump() == before) << "a refused call changed the database";
    }
    // Still serving.
    v1::ListRunsResponse runs;
    EXPECT_TRUE(stub_->ListRuns(test::context().get(), v1::ListRunsRequest(), &runs).ok());
  }

  test::InProcessEvod evod_;
  std::unique_ptr<Stub> stub_;
  std::string worker_, other_worker_;
  std::map<std::string, std::string> credentials_;  // worker id -> the credential its registration got
  v1::Run run_;
  v1::Lease lease_;
};

template <typename Req, typename Resp>
using Unary = grpc::Status (Stub::*)(grpc::ClientContext*, const Req&, Resp*);

template <typename Req, typename Resp>
std::function<grpc::Status(Stub&)> unary(Unary<Req, Resp> method, Req req) {
  return [method, req](Stub& stub) {
    Resp resp;
    return (stub.*method)(test::context().get(), req, &resp);
  };
}

std::function<grpc::Status(Stub&)> watch(const std::string& run_id) {
  return [run_id](Stub& stub) {
    v1::RunRef ref;
    ref.set_run_id(run_id);
    auto ctx = test::context();
    auto reader = stub.WatchRun(ctx.get(), ref);
    v1::RunStatus st;
    while (reader->Read(&st)) {
    }
    return reader->Finish();
  };
}

// One more typed start genome of fa_s512_v3, naming one gene.
void typed_start(v1::SubmitRunRequest& r, const std::string& gene, int64_t value) {
  v1::Genome* g = r.add_typed_start_genomes();
  g->set_kernel("fa_s512_v3");
  (*g->mutable_genes())[gene] = value;
}

v1::RunRef run_ref(const std::string& id) {
  v1::RunRef r;
  r.set_run_id(id);
  return r;
}

TEST_F(RpcBadInput, RegisterWorker) {
  auto req = [](const std::function<void(v1::RegisterWorkerRequest&)>& edit) {
    v1::RegisterWorkerRequest r;
    r.set_name("w");
    *r.mutable_device() = test::test_device();
    edit(r);
    return unary(&Stub::RegisterWorker, r);
  };
  expect_refused({
      {"no device class", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.mutable_device()->clear_device_class(); })},
      {"10 MB name", StatusCode::RESOURCE_EXHAUSTED, req([](auto& r) { r.set_name(k10MB); })},
      {"1 MB name", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.set_name(k1MB); })},
      {"name with a newline", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.set_name("w\nevent=forged"); })},
      {"1 MB enrolment key", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.set_enrolment_key(k1MB); })},
      {"enrolment key evod never made", StatusCode::PERMISSION_DENIED,
       req([](auto& r) { r.set_enrolment_key(std::string(64, 'a')); })},
      {"1 MB device class", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.mutable_device()->set_device_class(k1MB); })},
      {"negative sm_count", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.mutable_device()->set_sm_count(-132); })},
      {"1 MB timing", StatusCode::INVALID_ARGUMENT, req([](auto& r) { r.mutable_device()->set_timing(k1MB); })},
      {"template of other kernel code", StatusCode::FAILED_PRECONDITION, req([](auto& r) {
         r.mutable_device()->set_template_fingerprints(0, "fa_s512_v3@0000000000000000");
       })},
      {"template of other code, 256-byte fingerprint", StatusCode::FAILED_PRECONDITION, req([](auto& r) {
         r.mutable_device()->set_template_fingerprints(0, "fa_s512_v3@" + std::string(245, 'f'));
       })},
      {"no template fingerprints", StatusCode::FAILED_PRECONDITION,
       req([](auto& r) { r.mutable_device()->clear_template_fingerprints(); })},
      {"65 template fingerprints", StatusCode::INVALID_ARGUMENT, req([](auto& r) {
         for (int i = 0; i < 64; ++i) r.mutable_device()->add_template_fingerprints("t@" + std::to_string(i));
       })},
      {"fingerprint with a newline", StatusCode::INVALID_ARGUMENT, req([](auto& r) {
         r.mutable_device()->add_template_fingerprints("t@1\nevent=forged");
       })},
      {"1 MB fingerprint", StatusCode::INVALID_ARGUMENT,
       req([](auto& r) { r.mutable_device()->add_template_fingerprints(k1MB); })},
  });
}

TEST_F(RpcBadInput, LeaseCandidates) {
  auto req = [this](const std::string& worker, int n, const std::string* credential = nullptr) {
    v1::LeaseRequest r;
    r.set_worker_id(worker);
    r.set_credential(credential ? *credential : credentials_[worker]);
    r.set_max_candidates(n);
    return unary(&Stub::LeaseCandidates, r);
  };
  const std::string none, others = credentials_[other_worker_], huge = k1MB;
  expect_refused({
      {"empty worker id", StatusCode::INVALID_ARGUMENT, req("", 1)},
      {"unknown worker id", StatusCode::NOT_FOUND, req("w-0000000000000000", 1)},
      {"no credential", StatusCode::PERMISSION_DENIED, req(worker_, 1, &none)},
      {"another worker's credential", StatusCode::PERMISSION_DENIED, req(worker_, 1, &others)},
      {"1 MB credential", StatusCode::INVALID_ARGUMENT, req(worker_, 1, &huge)},
      {"negative max_candidates", StatusCode::INVALID_ARGUMENT, req(worker_, -5)},
      {"1 MB worker id", StatusCode::INVALID_ARGUMENT, req(k1MB, 1)},
      {"10 MB worker id", StatusCode::RESOURCE_EXHAUSTED, req(k10MB, 1)},
  });
}

TEST_F(RpcBadInput, ReportResult) {
  auto report = [this](const std::function<void(v1::ReportRequest&)>& edit) {
    v1::ReportRequest r = report_of(good_evaluation());
    edit(r);
    return unary(&Stub::ReportResult, r);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  expect_refused({
      {"empty lease id", StatusCode::INVALID_ARGUMENT, report([](auto& r) { r.clear_lease_id(); })},
      {"empty worker id", StatusCode::INVALID_ARGUMENT, report([](auto& r) { r.clear_worker_id(); })},
      {"unknown lease", StatusCode::NOT_FOUND, report([](auto& r) { r.set_lease_id("l-0000000000000000"); })},
      {"unknown worker", StatusCode::NOT_FOUND, report([](auto& r) { r.set_worker_id("w-0000000000000000"); })},
      {"lease held by another worker", StatusCode::FAILED_PRECONDITION, report([this](auto& r) {
         r.set_worker_id(other_worker_);
         r.set_credential(credentials_[other_worker_]);
       })},
      {"as the lease's worker with another's credential", StatusCode::PERMISSION_DENIED,
       report([this](auto& r) { r.set_credential(credentials_[other_worker_]); })},
      {"as the lease's worker without its credential", StatusCode::PERMISSION_DENIED,
       report([](auto& r) { r.clear_credential(); })},
      {"a time below the device's physical floor", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         r.mutable_evaluation()->set_fitness_us(1e-9);
         r.mutable_evaluation()->mutable_shapes(0)->set_median_us(1e-9);
       })},
      {"the smallest positive double as a time", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_fitness_us(5e-324); })},
      {"no evaluation", StatusCode::INVALID_ARGUMENT, report([](auto& r) { r.clear_evaluation(); })},
      {"unspecified status", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_status(v1::EVAL_STATUS_UNSPECIFIED); })},
      {"status out of the enum", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_status(static_cast<v1::EvalStatus>(99)); })},
      {"NaN fitness", StatusCode::INVALID_ARGUMENT, report([&](auto& r) { r.mutable_evaluation()->set_fitness_us(nan); })},
      {"infinite fitness", StatusCode::INVALID_ARGUMENT,
       report([&](auto& r) { r.mutable_evaluation()->set_fitness_us(inf); })},
      {"negative fitness", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_fitness_us(-42); })},
      {"NaN fitness on a failed evaluation", StatusCode::INVALID_ARGUMENT, report([&](auto& r) {
         r.mutable_evaluation()->set_status(v1::INCORRECT);
         r.mutable_evaluation()->set_fitness_us(nan);
       })},
      {"zero fitness with status OK", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_fitness_us(0); })},
      {"negative median time", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->mutable_shapes(0)->set_median_us(-1); })},
      {"NaN p90 time", StatusCode::INVALID_ARGUMENT,
       report([&](auto& r) { r.mutable_evaluation()->mutable_shapes(0)->set_p90_us(nan); })},
      {"infinite resident time", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) {
         r.mutable_evaluation()->mutable_shapes(0)->set_resident_us(std::numeric_limits<double>::infinity());
       })},
      {"negative compile time", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->set_compile_ms(-3); })},
      {"non-finite wall time", StatusCode::INVALID_ARGUMENT,
       report([nan](auto& r) { r.mutable_evaluation()->set_wall_ms(nan); })},
      {"negative gate time", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         auto* g = r.mutable_evaluation()->add_gates();
         set_gate_forms(*g, v1::GATE_TIMED, v1::VERDICT_PASSED);
         g->set_elapsed_ms(-1);
       })},
      {"gate out of the enum", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         set_gate_forms(*r.mutable_evaluation()->add_gates(), static_cast<v1::Gate>(99), v1::VERDICT_PASSED);
       })},
      {"gate label that names no gate", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         auto* g = r.mutable_evaluation()->add_gates();
         g->set_gate("warp_speed");  // as a worker before the enums would send it
         g->set_verdict("passed");
       })},
      {"verdict out of the enum", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         set_gate_forms(*r.mutable_evaluation()->add_gates(), v1::GATE_TIMED, static_cast<v1::Verdict>(99));
       })},
      {"gate without a verdict", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->add_gates()->set_kind(v1::GATE_COMPILE); })},
      {"negative error figure", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->mutable_shapes(0)->set_rel_l2_error(-0.5); })},
      {"negative register count", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->mutable_resources()->set_registers(-1); })},
      {"10k shape results", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         for (int i = 0; i < 10000; ++i) r.mutable_evaluation()->add_shapes()->set_median_us(1);
       })},
      {"2 MB ptxas log", StatusCode::INVALID_ARGUMENT, report([](auto& r) {
         r.mutable_evaluation()->mutable_resources()->set_ptxas_log(std::string(2u << 20, 'p'));
       })},
      {"10 MB message", StatusCode::RESOURCE_EXHAUSTED,
       report([](auto& r) { r.mutable_evaluation()->set_message(k10MB); })},
      {"wrong device class", StatusCode::INVALID_ARGUMENT,
       report([](auto& r) { r.mutable_evaluation()->mutable_device()->set_device_class("sm_80/Other GPU"); })},
  });
  // None of that touched the lease: the right report is still accepted, once.
  v1::ReportResponse resp;
  ASSERT_TRUE(stub_->ReportResult(test::context().get(), report_of(good_evaluation()), &resp).ok());
  EXPECT_TRUE(resp.accepted());
  EXPECT_FALSE(resp.duplicate());
}

// A NaN error figure is evidence of a broken kernel, not bad input: an INCORRECT result carries it.
TEST_F(RpcBadInput, IncorrectResultMayCarryNaNErrorFigures) {
  v1::Evaluation e;
  e.set_status(v1::INCORRECT);
  e.set_message("incorrect: 512 NaN outputs");
  *e.mutable_device() = test::test_device();
  auto* s = e.add_shapes();
  s->set_rel_l2_error(std::numeric_limits<double>::quiet_NaN());
  s->set_nonfinite(512);
  v1::ReportResponse resp;
  grpc::Status st = stub_->ReportResult(test::context().get(), report_of(e), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(resp.accepted());
}

TEST_F(RpcBadInput, Heartbeat) {
  auto beat = [this](const std::string& worker, int leases, const std::string& lease_id) {
    v1::HeartbeatRequest r;
    r.set_worker_id(worker);
    r.set_credential(credentials_[worker]);
    for (int i = 0; i < leases; ++i) r.add_lease_ids(lease_id);
    return unary(&Stub::Heartbeat, r);
  };
  expect_refused({
      {"empty worker id", StatusCode::INVALID_ARGUMENT, beat("", 0, "")},
      {"unknown worker", StatusCode::NOT_FOUND, beat("w-0000000000000000", 1, "l-1")},
      {"another worker's credential", StatusCode::PERMISSION_DENIED, [this](Stub& stub) {
         v1::HeartbeatRequest r;
         r.set_worker_id(worker_);
         r.set_credential(credentials_[other_worker_]);
         v1::HeartbeatResponse resp;
         return stub.Heartbeat(test::context().get(), r, &resp);
       }},
      {"10k lease ids", StatusCode::INVALID_ARGUMENT, beat(worker_, 10000, "l-0000000000000000")},
      {"1 MB lease id", StatusCode::INVALID_ARGUMENT, beat(worker_, 1, k1MB)},
      {"empty lease id", StatusCode::INVALID_ARGUMENT, beat(worker_, 1, "")},
      {"10 MB lease id", StatusCode::RESOURCE_EXHAUSTED, beat(worker_, 1, k10MB)},
  });
}

TEST_F(RpcBadInput, SubmitRun) {
  auto submit = [](const std::function<void(v1::SubmitRunRequest&)>& edit) {
    v1::SubmitRunRequest r;
    r.set_seed("fa_s512_v3");
    r.set_population(4);
    r.set_generations(1);
    r.set_top_k(1);
    edit(r);
    return unary(&Stub::SubmitRun, r);
  };
  expect_refused({
      {"empty seed", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.clear_seed(); })},
      {"unknown seed", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_seed("no_such_kernel"); })},
      {"10 MB seed", StatusCode::RESOURCE_EXHAUSTED, submit([](auto& r) { r.set_seed(k10MB); })},
      {"1 MB seed", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_seed(k1MB); })},
      {"seq of 2^30", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_shapes("1x1x1073741824x64"); })},
      {"tensor of 2^31 elements", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_shapes("1024x32x1024x64"); })},
      {"negative dimension", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_shapes("-1x8x512x64"); })},
      {"zero dimension", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_shapes("1x0x512x64"); })},
      {"malformed shape", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_shapes("1x8x512"); })},
      {"head_dim the kernel cannot serve", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_shapes("1x8x512x96"); })},
      {"10k shapes", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         for (int i = 0; i < 10000; ++i) r.add_shapes("1x8x512x64");
       })},
      {"1 MB shape", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_shapes(k1MB); })},
      {"negative generations", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_generations(-1); })},
      {"negative population", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_population(-16); })},
      {"absurd population", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_population(1 << 30); })},
      {"negative top_k", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_top_k(-3); })},
      {"top_k above population", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_top_k(5); })},
      {"unknown strategy", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_strategy("annealing"); })},
      {"strategy out of the enum", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.set_search_strategy(static_cast<v1::SearchStrategy>(9)); })},
      {"1 MB strategy", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_strategy(k1MB); })},
      {"unknown fitness inputs", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_fitness_inputs("warm"); })},
      {"fitness inputs out of the enum", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.set_fitness_from(static_cast<v1::FitnessInputs>(7)); })},
      {"1 MB fitness inputs", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.set_fitness_inputs(k1MB); })},
      {"device class with a control character", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.set_device_class("sm_90a\x1b[2J"); })},
      {"start genome with an unknown gene", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("BLOCK_Q=64"); })},
      {"start genome with an unknown schedule", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("SCHEDULE=fast"); })},
      {"start genome whose old genes name no schedule", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("TMA=1,PINGPONG=1"); })},
      {"start genome mixing old genes with SCHEDULE", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("SCHEDULE=tma,TMA=1"); })},
      {"start genome over the shared memory limit", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("BLOCK_M=128,BLOCK_N=256,STAGES=4"); })},
      {"1 MB start genome", StatusCode::INVALID_ARGUMENT, submit([](auto& r) { r.add_start_genomes(k1MB); })},
      {"10k start genomes", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         for (int i = 0; i < 10000; ++i) r.add_start_genomes("BLOCK_M=64");
       })},
      {"start genome with a control character", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { r.add_start_genomes("BLOCK_M=64\n"); })},
      {"typed start genome with an unknown gene", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { typed_start(r, "BLOCK_Q", 64); })},
      {"typed start genome naming a retired gene", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { typed_start(r, "TMA", 1); })},
      {"typed start genome out of a domain", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { typed_start(r, "BLOCK_M", 48); })},
      {"typed start genome with a schedule past its labels", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { typed_start(r, "SCHEDULE", 99); })},
      {"typed start genome of another kernel", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         typed_start(r, "BLOCK_M", 64);
         r.mutable_typed_start_genomes(0)->set_kernel("fa_other");
       })},
      {"typed start genome naming no kernel", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         typed_start(r, "BLOCK_M", 64);
         r.mutable_typed_start_genomes(0)->clear_kernel();
       })},
      {"typed start genome over the shared memory limit", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         typed_start(r, "BLOCK_M", 128);
         (*r.mutable_typed_start_genomes(0)->mutable_genes())["BLOCK_N"] = 256;
         (*r.mutable_typed_start_genomes(0)->mutable_genes())["STAGES"] = 4;
       })},
      {"typed start genome with 10k genes", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         typed_start(r, "BLOCK_M", 64);
         auto& genes = *r.mutable_typed_start_genomes(0)->mutable_genes();
         for (int i = 0; i < 10000; ++i) genes["G" + std::to_string(i)] = 1;
       })},
      {"typed start genome with a 1 MB gene name", StatusCode::INVALID_ARGUMENT,
       submit([](auto& r) { typed_start(r, k1MB, 1); })},
      {"10k typed start genomes", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         for (int i = 0; i < 10000; ++i) typed_start(r, "BLOCK_M", 64);
       })},
      {"a good text beside a bad typed start genome", StatusCode::INVALID_ARGUMENT, submit([](auto& r) {
         r.add_start_genomes("BLOCK_M=64");
         typed_start(r, "BLOCK_M", 48);
       })},
  });
}

// The typed genome wins over the text, and is checked once with one clear line naming it.
TEST_F(RpcBadInput, TypedStartGenomeErrorNamesTheGeneAndTheDomain) {
  v1::SubmitRunRequest r;
  r.set_seed("fa_s512_v3");
  r.set_population(4);
  r.set_generations(1);
  r.set_top_k(1);
  r.add_start_genomes("BLOCK_M=64");
  typed_start(r, "BLOCK_M", 48);
  v1::Run run;
  const grpc::Status s = stub_->SubmitRun(test::context().get(), r, &run);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "typed_start_genomes[0]: genome of fa_s512_v3: BLOCK_M=48 is outside its domain {16, 32, 64, 128}");
}

TEST_F(RpcBadInput, RunLookups) {
  const std::string unknown = "r-does-not-exist";
  expect_refused({
      {"GetRun empty id", StatusCode::INVALID_ARGUMENT, unary(&Stub::GetRun, run_ref(""))},
      {"GetRun unknown id", StatusCode::NOT_FOUND, unary(&Stub::GetRun, run_ref(unknown))},
      {"GetRun 1 MB id", StatusCode::INVALID_ARGUMENT, unary(&Stub::GetRun, run_ref(k1MB))},
      {"GetRun 10 MB id", StatusCode::RESOURCE_EXHAUSTED, unary(&Stub::GetRun, run_ref(k10MB))},
      {"WatchRun empty id", StatusCode::INVALID_ARGUMENT, watch("")},
      {"WatchRun unknown id", StatusCode::NOT_FOUND, watch(unknown)},
      {"WatchRun 10 MB id", StatusCode::RESOURCE_EXHAUSTED, watch(k10MB)},
      {"CancelRun empty id", StatusCode::INVALID_ARGUMENT, unary(&Stub::CancelRun, run_ref(""))},
      {"CancelRun unknown id", StatusCode::NOT_FOUND, unary(&Stub::CancelRun, run_ref(unknown))},
      {"CancelRun 10 MB id", StatusCode::RESOURCE_EXHAUSTED, unary(&Stub::CancelRun, run_ref(k10MB))},
  });
}

TEST_F(RpcBadInput, LeaderboardAndExport) {
  auto board = [](const std::string& id, int top) {
    v1::LeaderboardRequest r;
    r.set_run_id(id);
    r.set_top(top);
    return unary(&Stub::Leaderboard, r);
  };
  auto exp = [](const std::string& id, const std::string& source_name = "") {
    v1::ExportRequest r;
    r.set_run_id(id);
    r.set_source_name(source_name);
    return unary(&Stub::ExportBest, r);
  };
  expect_refused({
      {"Leaderboard negative top", StatusCode::INVALID_ARGUMENT, board(run_.run_id(), -1)},
      {"Leaderboard unknown run", StatusCode::NOT_FOUND, board("r-does-not-exist", 10)},
      {"Leaderboard 1 MB id", StatusCode::INVALID_ARGUMENT, board(k1MB, 10)},
      {"Leaderboard 10 MB id", StatusCode::RESOURCE_EXHAUSTED, board(k10MB, 10)},
      {"ExportBest empty id", StatusCode::INVALID_ARGUMENT, exp("")},
      {"ExportBest unknown run", StatusCode::NOT_FOUND, exp("r-does-not-exist")},
      {"ExportBest run without a result", StatusCode::FAILED_PRECONDITION, exp(run_.run_id())},
      {"ExportBest 10 MB id", StatusCode::RESOURCE_EXHAUSTED, exp(k10MB)},
      {"ExportBest 1 MB source name", StatusCode::INVALID_ARGUMENT, exp(run_.run_id(), k1MB)},
  });
}

TEST_F(RpcBadInput, ListCandidates) {
  auto list = [](const std::string& id, int limit) {
    v1::ListCandidatesRequest r;
    r.set_run_id(id);
    r.set_limit(limit);
    return unary(&Stub::ListCandidates, r);
  };
  expect_refused({
      {"ListCandidates empty id", StatusCode::INVALID_ARGUMENT, list("", 0)},
      {"ListCandidates unknown run", StatusCode::NOT_FOUND, list("r-does-not-exist", 0)},
      {"ListCandidates negative limit", StatusCode::INVALID_ARGUMENT, list(run_.run_id(), -1)},
      {"ListCandidates limit over 1000", StatusCode::INVALID_ARGUMENT, list(run_.run_id(), 1001)},
      {"ListCandidates 1 MB id", StatusCode::INVALID_ARGUMENT, list(k1MB, 0)},
      {"ListCandidates 10 MB id", StatusCode::RESOURCE_EXHAUSTED, list(k10MB, 0)},
  });
}

TEST_F(RpcBadInput, ListWorkers) {
  // Its one field is a bool: what can be wrong is the size, here of fields evod does not know.
  v1::ListWorkersRequest huge;
  huge.GetReflection()->MutableUnknownFields(&huge)->AddLengthDelimited(99, k10MB);
  expect_refused({{"ListWorkers 10 MB of unknown fields", StatusCode::RESOURCE_EXHAUSTED,
                   unary(&Stub::ListWorkers, huge)}});
}

// Bytes that are not the RPC's message at all (a raw client, a different protocol): gRPC parses
// them before any handler runs; the answer still names what was expected, as INVALID_ARGUMENT.
grpc::Status raw_call(const std::string& address, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  auto ctx = test::context();
  stub.UnaryCall(ctx.get(), method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

TEST_F(RpcBadInput, BytesThatDoNotParseAreInvalidArgumentNamingTheMessage) {
  const std::string garbage = "\xff\xff\xff\xff\x0f garbage, not protobuf";
  for (const auto& [rpc, type] : std::vector<std::pair<std::string, std::string>>{
           {"ReportResult", "evo.v1.ReportRequest"}, {"SubmitRun", "evo.v1.SubmitRunRequest"}}) {
    SCOPED_TRACE(rpc);
    const std::string before = evod_.store().dump();
    grpc::Status s = raw_call(evod_.address(), "/evo.v1.Coordinator/" + rpc, garbage);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << s.error_code() << " " << s.error_message();
    EXPECT_NE(s.error_message().find(rpc + ": the request is not a valid " + type), std::string::npos)
        << s.error_message();
    EXPECT_TRUE(evod_.store().dump() == before) << "bytes that do not parse changed the database";
  }
  // A well-formed message through the same raw path is served as usual.
  v1::ListRunsRequest list;
  EXPECT_TRUE(raw_call(evod_.address(), "/evo.v1.Coordinator/ListRuns", list.SerializeAsString()).ok());
}

// Every RPC of the service has a bad-input case above (ListRuns takes no argument: it is called
// after every batch to show evod still serves); a new RPC must get its own.
TEST(RpcBadInputCoverage, EveryRpcOfTheServiceIsCovered) {
  const std::set<std::string> covered = {"RegisterWorker", "LeaseCandidates", "ReportResult", "Heartbeat",
                                         "SubmitRun",      "GetRun",          "WatchRun",     "CancelRun",
                                         "Leaderboard",    "ExportBest",      "ListRuns",     "ListWorkers",
                                         "ListCandidates"};
  const auto* service = v1::ReportRequest::descriptor()->file()->FindServiceByName("Coordinator");
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i)
    EXPECT_TRUE(covered.count(service->method(i)->name())) << service->method(i)->name() << " has no bad-input case";
  EXPECT_EQ(service->method_count(), static_cast<int>(covered.size()));
}

}  // namespace
}  // namespace evo
