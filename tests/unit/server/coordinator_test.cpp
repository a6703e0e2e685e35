// The coordinator's scheduling logic in-process, with a fake evaluator and a fake clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "attention/dtype.h"
#include "coordinator.h"
#include "genome_proto.h"
#include "search_space.h"
#include "store.h"
#include "store_sqlite.h"
#include "template_registry.h"
#include "test_db.h"
#include "wire_labels.h"

namespace evo {
namespace {

using Code = CoordinatorError::Code;

v1::DeviceInfo device(const std::string& device_class, bool estimated = false) {
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

// A deterministic stand-in for a GPU: the time depends on the genome text only, times a per-call
// factor the test chooses (to model agreeing or disagreeing repeat measurements).
double fake_us(const std::string& genome) {
  return 50.0 + static_cast<double>(std::hash<std::string>{}(genome) % 1000) / 10.0;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : store_(dir_.file("evo.db")) {
    CoordinatorOptions opt;
    opt.lease_ttl_ms = 1000;
    opt.clock = [this] { return now_; };
    coord_ = std::make_unique<Coordinator>(store_, opt);
  }

  std::string add_worker(const std::string& device_class, bool estimated = false) {
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    *req.mutable_device() = device(device_class, estimated);
    const auto registered = coord_->register_worker(req);
    credentials_[registered.worker_id()] = registered.credential();
    return registered.worker_id();
  }

  v1::Run submit(int generations, int population, int top_k, uint64_t rng = 7,
               const std::string& shape = "") {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    if (!shape.empty()) req.add_shapes(shape);
    req.set_generations(generations);
    req.set_population(population);
    req.set_top_k(top_k);
    req.set_rng_seed(rng);
    return coord_->submit(req);
  }

  v1::Evaluation evaluation(const v1::Lease& lease, const std::string& device_class, double factor,
                            bool estimated = false) {
    v1::Evaluation e;
    e.set_status(v1::OK);
    e.set_fitness_us(fake_us(lease.genome()) * factor);
    e.set_estimated(estimated);
    *e.mutable_device() = device(device_class, estimated);
    return e;
  }

  v1::ReportResponse report(const std::string& worker, const v1::Lease& lease, const v1::Evaluation& e) {
    v1::ReportRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_lease_id(lease.lease_id());
    *req.mutable_evaluation() = e;
    return coord_->report(req);
  }

  v1::LeaseResponse lease(const std::string& worker, int n = 1) {
    v1::LeaseRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_max_candidates(n);
    return coord_->lease(req);
  }

  // Drives workers round-robin until nothing is left to lease; returns the leases handed out.
  int drive(const std::vector<std::string>& workers, const std::string& device_class,
            const std::function<double(const v1::Lease&)>& factor, bool estimated = false) {
    int leased = 0;
    for (int idle_rounds = 0; idle_rounds < 2;) {
      bool any = false;
      for (const auto& w : workers) {
        auto granted = lease(w, 2);
        for (const auto& l : granted.leases()) {
          any = true;
          ++leased;
          report(w, l, evaluation(l, device_class, factor(l), estimated));
        }
        now_ += 10;
      }
      idle_rounds = any ? 0 : idle_rounds + 1;
    }
    return leased;
  }

  int cache_entries() {
    SqliteConnection db(dir_.file("evo.db"));
    auto s = db.prepare("SELECT COUNT(*) FROM result_cache");
    return s.step() ? static_cast<int>(s.column_int(0)) : 0;
  }

  Code code_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const CoordinatorError& e) {
      return e.code();
    }
    ADD_FAILURE() << "no CoordinatorError";
    return Code::kInvalidArgument;
  }

  test::TempDir dir_;
  Store store_;
  int64_t now_ = 1'000'000;
  std::unique_ptr<Coordinator> coord_;
  std::map<std::string, std::string> credentials_;  // worker id -> the credential its registration got
};

TEST_F(CoordinatorTest, RunFinishesWithConfirmedElitesInFitnessOrder) {
  auto a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  auto run = submit(3, 8, 3);
  // Repeat measurements agree within 2 %.
  int leased = drive({a, b}, "sm_90a/Fake", [](const v1::Lease& l) { return l.confirmation() ? 1.02 : 1.0; });
  auto st = coord_->status(run.run_id());
  EXPECT_EQ(st.run().state(), v1::DONE);
  EXPECT_EQ(st.evaluations_done(), 24);
  // Some candidates were measured twice: confirmations happened.
  EXPECT_GT(leased, 24);
  v1::LeaderboardRequest lr;
  lr.set_run_id(run.run_id());
  auto board = coord_->leaderboard(lr);
  ASSERT_EQ(board.elites_size(), 3);
  for (int i = 1; i < 3; ++i) EXPECT_LE(board.elites(i - 1).fitness_us(), board.elites(i).fitness_us());
  for (const auto& e : board.elites()) {
    EXPECT_NEAR(e.spread_pct(), 0.02 / 1.01 * 100, 0.01);  // |a-b| / mean, in percent
    EXPECT_FALSE(e.estimated());
    EXPECT_FALSE(e.parents().empty());
  }
  EXPECT_GT(board.seed_us(), 0);
  EXPECT_EQ(board.seed_genome(), SearchSpace::for_template("fa_s512_v3").default_genome().text());
}

TEST_F(CoordinatorTest, DisagreeingConfirmationKeepsACandidateOutOfTheElites) {
  auto a = add_worker("sm_90a/Fake");
  auto run = submit(1, 6, 3);
  drive({a}, "sm_90a/Fake", [](const v1::Lease& l) { return l.confirmation() ? 1.5 : 1.0; });
  v1::LeaderboardRequest lr;
  lr.set_run_id(run.run_id());
  EXPECT_EQ(coord_->leaderboard(lr).elites_size(), 0);
  EXPECT_EQ(coord_->status(run.run_id()).run().state(), v1::DONE);
}

TEST_F(CoordinatorTest, ConfirmationGoesToAnotherWorkerOfTheClass) {
  auto a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  auto first = lease(a).leases(0);
  report(a, first, evaluation(first, "sm_90a/Fake", 1.0));
  EXPECT_EQ(lease(a).leases_size(), 0) << "the first measurer must not confirm while another worker is live";
  auto second = lease(b);
  ASSERT_EQ(second.leases_size(), 1);
  EXPECT_TRUE(second.leases(0).confirmation());
  EXPECT_EQ(second.leases(0).candidate_id(), first.candidate_id());
}

TEST_F(CoordinatorTest, RepeatedReportIsIdempotent) {
  auto a = add_worker("sm_90a/Fake");
  submit(2, 4, 2);
  auto l = lease(a).leases(0);
  auto e = evaluation(l, "sm_90a/Fake", 1.0);
  auto first = report(a, l, e);
  EXPECT_TRUE(first.accepted());
  EXPECT_FALSE(first.duplicate());
  std::string before = store_.dump();
  auto again = report(a, l, e);
  EXPECT_TRUE(again.accepted());
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(store_.dump(), before);
}

TEST_F(CoordinatorTest, ExpiredLeaseIsRequeuedAndItsLateReportRefused) {
  auto a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  auto stale = lease(a).leases(0);
  now_ += 1001;
  EXPECT_EQ(coord_->sweep_expired_leases(), 1);
  auto c = store_.get_candidate(stale.candidate_id());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, v1::CANDIDATE_STATE_QUEUED);
  EXPECT_EQ(c->attempts, 1);
  auto fresh = lease(b).leases(0);
  EXPECT_EQ(fresh.candidate_id(), stale.candidate_id());
  std::string before = store_.dump();
  EXPECT_EQ(code_of([&] { report(a, stale, evaluation(stale, "sm_90a/Fake", 1.0)); }), Code::kFailedPrecondition);
  EXPECT_EQ(store_.dump(), before);
  EXPECT_TRUE(report(b, fresh, evaluation(fresh, "sm_90a/Fake", 1.0)).accepted());
}

TEST_F(CoordinatorTest, HeartbeatKeepsALeaseAlive) {
  auto a = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  auto l = lease(a).leases(0);
  for (int i = 0; i < 5; ++i) {
    now_ += 600;
    v1::HeartbeatRequest hb;
    hb.set_worker_id(a);
    hb.set_credential(credentials_[a]);
    hb.add_lease_ids(l.lease_id());
    EXPECT_EQ(coord_->heartbeat(hb).expired_lease_ids_size(), 0);
    EXPECT_EQ(coord_->sweep_expired_leases(), 0);
  }
  now_ += 1001;
  EXPECT_EQ(coord_->sweep_expired_leases(), 1);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(a);
  hb.set_credential(credentials_[a]);
  hb.add_lease_ids(l.lease_id());
  EXPECT_EQ(coord_->heartbeat(hb).expired_lease_ids_size(), 1);
}

TEST_F(CoordinatorTest, LeaseRepeatedlyLostIsRecordedAsCrash) {
  auto a = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  for (int i = 0; i < server::kMaxLeaseAttempts; ++i) {
    ASSERT_EQ(lease(a).leases_size(), 1) << "attempt " << i;
    now_ += 1001;
    coord_->sweep_expired_leases();
  }
  auto st = coord_->status("run-0001");
  EXPECT_EQ(st.run().state(), v1::DONE);
  EXPECT_EQ(st.failed(), 1);
}

TEST_F(CoordinatorTest, ReportsOnLeasesNotHeldAreRefusedAndChangeNothing) {
  auto a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  auto l = lease(a).leases(0);
  std::string before = store_.dump();
  EXPECT_EQ(code_of([&] { report(b, l, evaluation(l, "sm_90a/Fake", 1.0)); }), Code::kFailedPrecondition);
  v1::Lease unknown = l;
  unknown.set_lease_id("l-nope");
  EXPECT_EQ(code_of([&] { report(a, unknown, evaluation(l, "sm_90a/Fake", 1.0)); }), Code::kNotFound);
  EXPECT_EQ(code_of([&] { report("w-nobody", l, evaluation(l, "sm_90a/Fake", 1.0)); }), Code::kNotFound);
  // A result from another device class would mix measurements: refused.
  EXPECT_EQ(code_of([&] { report(a, l, evaluation(l, "sm_89/Other", 1.0)); }), Code::kInvalidArgument);
  v1::Evaluation no_status;
  EXPECT_EQ(code_of([&] { report(a, l, no_status); }), Code::kInvalidArgument);
  EXPECT_EQ(store_.dump(), before);
}

// A worker built from other kernel code than evod's would answer for a genome with another
// kernel's time, which the result cache then keeps: evod refuses to register it.
TEST_F(CoordinatorTest, AWorkerBuiltFromOtherTemplateCodeIsRefused) {
  const std::string before = store_.dump();
  auto refusal = [&](const std::function<void(v1::DeviceInfo&)>& edit) -> std::string {
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    *req.mutable_device() = device("sm_90a/Fake GPU");
    edit(*req.mutable_device());
    try {
      coord_->register_worker(req);
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), Code::kFailedPrecondition) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "registered";
    return "";
  };
  const std::string ours = template_fingerprint("fa_s512_v3");
  const std::string other =
      refusal([](v1::DeviceInfo& d) { d.set_template_fingerprints(0, "fa_s512_v3@0123456789abcdef"); });
  EXPECT_NE(other.find("fa_s512_v3@0123456789abcdef is not evod's " + ours), std::string::npos) << other;
  EXPECT_NE(other.find("deploy evod and evo-worker from one build"), std::string::npos) << other;
  const std::string none = refusal([](v1::DeviceInfo& d) { d.clear_template_fingerprints(); });
  EXPECT_NE(none.find("reports no fingerprint for template fa_s512_v3 (evod has " + ours + ")"),
            std::string::npos)
      << none;
  // Another template's fingerprint is not this one's.
  const std::string elsewhere =
      refusal([](v1::DeviceInfo& d) { d.set_template_fingerprints(0, "fa_other@0123456789abcdef"); });
  EXPECT_NE(elsewhere.find("no fingerprint for template fa_s512_v3"), std::string::npos) << elsewhere;
  EXPECT_EQ(store_.dump(), before);
  // The same worker with this build's fingerprints registers.
  EXPECT_FALSE(add_worker("sm_90a/Fake GPU").empty());
}

TEST_F(CoordinatorTest, BadSubmissionsAreRefusedAndChangeNothing) {
  std::string before = store_.dump();
  auto submit_with = [&](const std::function<void(v1::SubmitRunRequest&)>& edit) {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    edit(req);
    return code_of([&] { coord_->submit(req); });
  };
  EXPECT_EQ(submit_with([](auto& r) { r.set_seed("nope"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.add_shapes("1x8x512"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.add_shapes("1x8x512x96"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.add_shapes("1x8x512x64:fp8"); }), Code::kInvalidArgument);
  // A dtype from a newer client than this evod.
  EXPECT_EQ(submit_with([](auto& r) { r.set_dtype(static_cast<v1::DType>(7)); }), Code::kInvalidArgument);
  // Causal with unequal lengths: a kernel tuned for it would be refused by its own export.
  EXPECT_EQ(submit_with([](auto& r) { r.add_shapes("1x8x512x256x64:causal"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) {
              r.add_shapes("1x8x512x256x64");
              r.set_causal(true);
            }),
            Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_population(0); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_generations(-1); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_top_k(0); }), Code::kInvalidArgument);
  // By label (an evoctl before the enums) and by a number this build does not know.
  EXPECT_EQ(submit_with([](auto& r) { r.set_strategy("annealing"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_fitness_inputs("warm"); }), Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_search_strategy(static_cast<v1::SearchStrategy>(9)); }),
            Code::kInvalidArgument);
  EXPECT_EQ(submit_with([](auto& r) { r.set_fitness_from(static_cast<v1::FitnessInputs>(7)); }),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of([&] { coord_->status("run-9999"); }), Code::kNotFound);
  EXPECT_EQ(code_of([&] { coord_->cancel("run-9999"); }), Code::kNotFound);
  EXPECT_EQ(store_.dump(), before);
  try {
    v1::SubmitRunRequest req;
    req.set_seed("x");
    coord_->submit(req);
  } catch (const CoordinatorError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("unknown seed 'x'", 0), 0u) << e.what();
  }
  // A top-k the user never gave is named as the default, so the refusal makes sense.
  try {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.set_population(2);
    coord_->submit(req);
    ADD_FAILURE() << "a population of 2 under the default top-k 3 was accepted";
  } catch (const CoordinatorError& e) {
    EXPECT_EQ(std::string(e.what()), "top_k must be in 1..population (2), got 3 (the default)");
  }
}

// The request's dtype applies to shapes without a suffix; each run shape is stored canonical. A
// dtype the template's space does not list is one refusal naming it, and nothing is stored.
TEST_F(CoordinatorTest, SubmitAppliesTheDtypeAndRefusesOneTheTemplateLacks) {
  const auto& served = SearchSpace::for_template("fa_s512_v3").served().at("DTYPE");
  const bool bf16 = std::find(served.begin(), served.end(), static_cast<int64_t>(DType::kBF16)) != served.end();
  const std::string before = store_.dump();
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.add_shapes("1x8x512x64:bf16:causal");
  req.add_shapes("1x8x512x64:fp16");
  req.set_dtype(v1::DTYPE_BF16);
  if (bf16) {
    const v1::Run run = coord_->submit(req);
    ASSERT_EQ(run.shapes_size(), 2);
    EXPECT_EQ(run.shapes(0).dtype(), v1::DTYPE_BF16);
    EXPECT_TRUE(run.shapes(0).causal());
    EXPECT_EQ(run.shapes(1).dtype(), v1::DTYPE_FP16) << "a suffix wins over the request's dtype";
    return;
  }
  try {
    coord_->submit(req);
    ADD_FAILURE() << "bf16 accepted by a template that does not serve it";
  } catch (const CoordinatorError& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()),
              "shape '1x8x512x64:bf16:causal': dtype bf16 is not served by fa_s512_v3 (it serves fp16)");
  }
  EXPECT_EQ(store_.dump(), before);
  // fp16, by suffix or by default, is served.
  req.clear_shapes();
  req.add_shapes("1x8x512x64:fp16");
  req.set_dtype(v1::DTYPE_FP16);
  EXPECT_EQ(coord_->submit(req).shapes(0).dtype(), v1::DTYPE_FP16);
}

TEST_F(CoordinatorTest, BadStartGenomeIsOneClearRefusalAndChangesNothing) {
  const std::string before = store_.dump();
  auto refusal = [&](const std::vector<std::string>& starts, int population = 4) -> std::string {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.add_shapes("1x8x4096x64");
    req.add_shapes("1x8x512x64");
    req.set_population(population);
    req.set_top_k(1);
    for (const auto& g : starts) req.add_start_genomes(g);
    try {
      coord_->submit(req);
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "submit accepted " << ::testing::PrintToString(starts);
    return "";
  };
  const std::string good = "BLOCK_M=64,BLOCK_N=128";
  EXPECT_EQ(refusal({good, "BLOCK_Q=64"}).rfind("start genome 'BLOCK_Q=64': unknown gene 'BLOCK_Q' (genes: BLOCK_M,", 0),
            0u);
  EXPECT_EQ(refusal({"BLOCK_M=48"}), "start genome 'BLOCK_M=48': BLOCK_M=48 is outside its domain {16, 32, 64, 128}");
  EXPECT_EQ(refusal({"fa_other:BLOCK_M=64"}),
            "start genome 'fa_other:BLOCK_M=64': genome is for template 'fa_other', not 'fa_s512_v3'");
  EXPECT_EQ(refusal({"BLOCK_M=64;BLOCK_N=64"}).rfind("start genome 'BLOCK_M=64;BLOCK_N=64': malformed genome", 0), 0u);
  // Valid for the long shape, not for the short one: the constraint and the shape are named.
  EXPECT_EQ(refusal({"BLOCK_N=256,SPLIT_KV=8"}),
            "start genome 'BLOCK_N=256,SPLIT_KV=8' violates constraint 'split_has_keys' for shape 1x8x512x64");
  EXPECT_EQ(refusal({good, "BLOCK_M=128,BLOCK_N=256,STAGES=4"}),
            "start genome 'BLOCK_M=128,BLOCK_N=256,STAGES=4' violates constraint 'shared_memory_fits_device' for "
            "shape 1x8x4096x64");
  // Generation 0 has no room for them all.
  EXPECT_EQ(refusal({good, "BLOCK_M=128,WARPS=8"}, 2),
            "2 distinct start genomes and the default genome need a population of 3, got 2");
  EXPECT_EQ(refusal({good, "BLOCK_M=32,BLOCK_N=64"}, 1),
            "2 distinct start genomes (the default genome among them) need a population of 2, got 1");
  EXPECT_EQ(store_.dump(), before);
}

// A start genome's genes that none of the run's shapes uses are stored at their defaults, as the
// strategy proposes them: the run holds one text per kernel.
TEST_F(CoordinatorTest, StartGenomesAreStoredCanonicalForTheRunsShapes) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const std::string folded = "BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=2,CAUSAL_FOLD=1";
  for (bool causal : {false, true}) {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.set_generations(1);
    req.set_population(2);
    req.set_top_k(1);
    req.set_search_strategy(v1::SEARCH_STRATEGY_RANDOM);
    req.set_causal(causal);
    req.add_start_genomes(folded);
    const v1::Run run = coord_->submit(req);
    ASSERT_EQ(run.start_genomes_size(), 1);
    const Genome stored = space.parse(run.start_genomes(0));
    EXPECT_EQ(stored.get("CAUSAL_FOLD"), causal ? 1 : 0);
    EXPECT_EQ(stored.get("WARPS"), 8);
    const auto gen0 = store_.candidates_of_run(run.run_id());
    ASSERT_EQ(gen0.size(), 2u);
    EXPECT_EQ(gen0[1].genome, run.start_genomes(0));
  }
}

// A start genome in the text of the genes before SCHEDULE is stored in today's canonical text;
// one that no schedule matches is refused and no run is made.
TEST_F(CoordinatorTest, OldStartGenomeTextIsStoredInTodaysText) {
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_generations(1);
  req.set_population(2);
  req.set_top_k(1);
  req.set_strategy("random");
  req.add_start_genomes("fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,CP_ASYNC=1,WGMMA=1,PV_ASYNC=1,TMA=1,"
                        "STAGE_RELEASE=1,PINGPONG=1");
  const v1::Run run = coord_->submit(req);
  ASSERT_EQ(run.start_genomes_size(), 1);
  EXPECT_EQ(run.start_genomes(0),
            "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,SCHEDULE=pingpong,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
            "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
  const size_t runs = store_.list_runs().size();
  v1::SubmitRunRequest bad = req;
  bad.set_start_genomes(0, "BLOCK_M=64,PINGPONG=1");
  EXPECT_THROW(coord_->submit(bad), CoordinatorError);
  EXPECT_EQ(store_.list_runs().size(), runs);
}

// A typed start genome is read once (its text beside it ignored) and stored in canonical text;
// every answer that names a genome then carries its message beside the text: the run, the lease,
// the status, the leaderboard and the candidates.
TEST_F(CoordinatorTest, TypedGenomesTravelBesideTheirTexts) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const Genome start = space.parse("BLOCK_M=64,BLOCK_N=128,SCHEDULE=tma");
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_generations(1);
  req.set_population(2);
  req.set_top_k(2);
  req.set_search_strategy(v1::SEARCH_STRATEGY_RANDOM);
  req.add_start_genomes("BLOCK_M=16");  // an older evod's reading; this one reads the message
  *req.add_typed_start_genomes() = genome_to_proto(start);
  const v1::Run run = coord_->submit(req);
  ASSERT_EQ(run.start_genomes_size(), 1);
  EXPECT_EQ(run.start_genomes(0), start.text());
  ASSERT_EQ(run.typed_start_genomes_size(), 1);
  EXPECT_EQ(genome_from_proto(run.typed_start_genomes(0)), start);
  EXPECT_EQ(run.typed_start_genomes(0).genes().at("SCHEDULE"), 3);

  const auto worker = add_worker("sm_90a/model/estimated", true);
  const auto granted = lease(worker, 2);
  ASSERT_EQ(granted.leases_size(), 2);
  for (const auto& l : granted.leases()) {
    ASSERT_TRUE(l.has_typed_genome());
    EXPECT_EQ(genome_from_proto(l.typed_genome()).text(), l.genome());
    report(worker, l, evaluation(l, "sm_90a/model/estimated", 1.0, true));
  }
  // The would-be elites' confirmations (the lone worker's own), then the run has a best.
  drive({worker}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  const v1::RunStatus st = coord_->status(run.run_id());
  EXPECT_EQ(genome_from_proto(st.typed_best_genome()).text(), st.best_genome());
  v1::LeaderboardRequest lr;
  lr.set_run_id(run.run_id());
  const auto board = coord_->leaderboard(lr);
  EXPECT_EQ(genome_from_proto(board.typed_seed_genome()), space.default_genome());
  ASSERT_GT(board.elites_size(), 0);
  for (const auto& e : board.elites()) EXPECT_EQ(genome_from_proto(e.typed_genome()).text(), e.genome());
  v1::ListCandidatesRequest cr;
  cr.set_run_id(run.run_id());
  const auto listed = coord_->list_candidates(cr);
  EXPECT_EQ(genome_from_proto(listed.typed_seed_genome()), space.default_genome());
  ASSERT_EQ(listed.candidates_size(), 2);
  for (const auto& c : listed.candidates()) EXPECT_EQ(genome_from_proto(c.typed_genome()).text(), c.genome());
}

// A bad typed start genome is refused with one line naming it, whatever text lies beside it, and
// no run is made.
TEST_F(CoordinatorTest, BadTypedStartGenomeIsOneClearRefusalAndChangesNothing) {
  const std::string before = store_.dump();
  auto refusal = [&](const std::function<void(v1::Genome&)>& edit) -> std::string {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.set_population(4);
    req.set_top_k(1);
    req.add_start_genomes("BLOCK_M=64");
    v1::Genome* g = req.add_typed_start_genomes();
    *g = genome_to_proto(SearchSpace::for_template("fa_s512_v3").parse("BLOCK_M=64"));
    edit(*g);
    try {
      coord_->submit(req);
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "submit accepted";
    return "";
  };
  EXPECT_EQ(refusal([](v1::Genome& g) { (*g.mutable_genes())["BLOCK_Q"] = 64; })
                .rfind("typed_start_genomes[0]: genome of fa_s512_v3: unknown gene 'BLOCK_Q' (genes: BLOCK_M,", 0),
            0u);
  EXPECT_EQ(refusal([](v1::Genome& g) { (*g.mutable_genes())["SCHEDULE"] = 14; }).rfind(
                "typed_start_genomes[0]: genome of fa_s512_v3: SCHEDULE=14 is outside its domain {sync, cp_async,", 0),
            0u);
  EXPECT_EQ(refusal([](v1::Genome& g) { g.set_kernel("fa_other"); }),
            "typed_start_genomes[0] is a genome of 'fa_other', not of the seed 'fa_s512_v3'");
  EXPECT_EQ(refusal([](v1::Genome& g) { g.clear_kernel(); }), "typed_start_genomes[0]: genome names no kernel");
  // A message that reads is named by its text.
  EXPECT_EQ(refusal([](v1::Genome& g) {
              (*g.mutable_genes())["BLOCK_M"] = 128;
              (*g.mutable_genes())["BLOCK_N"] = 256;
              (*g.mutable_genes())["STAGES"] = 4;
            }),
            "start genome '" + SearchSpace::for_template("fa_s512_v3").parse("BLOCK_M=128,BLOCK_N=256,STAGES=4").text() +
                "' violates constraint 'shared_memory_fits_device' for shape 1x8x512x64");
  EXPECT_EQ(store_.dump(), before);
}

TEST_F(CoordinatorTest, StartGenomesLeadGenerationZeroAndSurviveARestart) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  // WGMMA=1 breaks no constraint evod can check: SM_ARCH is the worker's to check.
  const std::string wgmma = "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma";
  const std::string wide = "fa_s512_v3:BLOCK_M=128,WARPS=8";
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_generations(3);
  req.set_population(4);
  req.set_top_k(2);
  req.set_strategy("random");  // by label, as an evoctl from before the enums sends it
  for (const auto& g : {wgmma, wide, wgmma}) req.add_start_genomes(g);
  const v1::Run run = coord_->submit(req);
  EXPECT_EQ(run.search_strategy(), v1::SEARCH_STRATEGY_RANDOM);
  const std::vector<std::string> canonical = {space.parse(wgmma).text(), space.parse(wide).text()};
  EXPECT_EQ(std::vector<std::string>(run.start_genomes().begin(), run.start_genomes().end()), canonical);

  auto gen0 = store_.candidates_of_run(run.run_id());
  ASSERT_EQ(gen0.size(), 4u);
  EXPECT_EQ(gen0[0].op, "seed");
  EXPECT_EQ(gen0[1].genome, canonical[0]);
  EXPECT_EQ(gen0[2].genome, canonical[1]);
  for (int i : {1, 2}) {
    EXPECT_EQ(gen0[i].op, "start");
    EXPECT_EQ(gen0[i].generation, 0);
  }

  // evod restarts: the run, start genomes included, comes back from the file.
  coord_.reset();
  Store reopened(dir_.file("evo.db"));
  CoordinatorOptions opt;
  opt.lease_ttl_ms = 1000;
  opt.clock = [this] { return now_; };
  coord_ = std::make_unique<Coordinator>(reopened, opt);
  const auto st = coord_->status(run.run_id());
  EXPECT_EQ(std::vector<std::string>(st.run().start_genomes().begin(), st.run().start_genomes().end()), canonical);
  drive({add_worker("sm_90a/model/estimated", true)}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; },
        true);
  EXPECT_EQ(coord_->status(run.run_id()).run().state(), v1::DONE);
  auto all = reopened.candidates_of_run(run.run_id());
  EXPECT_EQ(all.size(), 12u);
  for (const auto& c : all) {
    const bool is_start = std::find(canonical.begin(), canonical.end(), c.genome) != canonical.end();
    EXPECT_EQ(c.op == "start", is_start) << c.id << " " << c.genome;
    if (is_start) {
      EXPECT_EQ(c.generation, 0) << c.id;
    }
  }
}

TEST_F(CoordinatorTest, DefaultsApplyWhenSizesAreUnset) {
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  auto run = coord_->submit(req);
  EXPECT_EQ(run.generations(), 5);
  EXPECT_EQ(run.population(), 16);
  EXPECT_EQ(run.top_k(), 3);
  ASSERT_EQ(run.shapes_size(), 1);
  EXPECT_EQ(run.shapes(0).seq_q(), 512);
  EXPECT_EQ(run.shapes(0).head_dim(), 64);
}

TEST_F(CoordinatorTest, RunKeepsToTheDeviceClassOfItsFirstWorker) {
  auto model = add_worker("sm_90a/model/estimated", true);
  auto gpu = add_worker("sm_90a/Fake");
  auto run = submit(1, 4, 2);
  ASSERT_EQ(lease(model).leases_size(), 1);
  EXPECT_EQ(lease(gpu, 4).leases_size(), 0) << "measured and estimated results must never mix";
  EXPECT_EQ(coord_->status(run.run_id()).run().device_class(), "sm_90a/model/estimated");
}

TEST_F(CoordinatorTest, StatusCountsTheLiveWorkersThatCouldServeTheRun) {
  auto run = submit(1, 4, 2);
  auto live = [&] { return coord_->status(run.run_id()); };
  ASSERT_TRUE(live().has_live_workers());
  EXPECT_EQ(live().live_workers(), 0) << "no worker has registered";
  auto gpu = add_worker("sm_90a/Fake");
  EXPECT_EQ(live().live_workers(), 1) << "a run whose class is not fixed takes any class";
  ASSERT_EQ(lease(gpu).leases_size(), 1);
  add_worker("sm_90a/model/estimated", true);
  EXPECT_EQ(live().live_workers(), 1) << "the first lease fixed the class; the model worker cannot serve it";
  // Three heartbeat intervals (the TTL's third each) without a word: gone.
  now_ += 3 * (1000 / 3) + 1;
  EXPECT_EQ(live().live_workers(), 0);
  EXPECT_EQ(coord_->list_runs().runs(0).live_workers(), 0);
  v1::HeartbeatRequest beat;
  beat.set_worker_id(gpu);
  beat.set_credential(credentials_[gpu]);
  coord_->heartbeat(beat);
  EXPECT_EQ(live().live_workers(), 1);
  coord_->cancel(run.run_id());
  EXPECT_FALSE(live().has_live_workers()) << "an ended run waits for nothing";
}

TEST_F(CoordinatorTest, ListCandidatesSaysWhichGateRefusedWhichCandidate) {
  auto w = add_worker("sm_90a/model/estimated", true);
  auto run = submit(1, 4, 2);
  auto granted = lease(w, 4);
  ASSERT_EQ(granted.leases_size(), 4);
  for (int i = 0; i < 4; ++i) {
    auto e = evaluation(granted.leases(i), "sm_90a/model/estimated", 1.0, true);
    if (i % 2) {  // two of them spill
      e.set_status(v1::RESOURCE_REJECT);
      e.set_message("register spills 16 bytes stored / 20 bytes loaded > limit 0 bytes");
      e.clear_fitness_us();
      auto* g = e.add_gates();  // by label only, as a worker from before the gate enums reports
      g->set_gate("compile");
      g->set_verdict("failed");
    }
    e.mutable_resources()->set_ptxas_log(std::string(4000, 'p'));
    report(w, granted.leases(i), e);
  }
  // The two that passed are would-be elites: their confirmations (by the one worker) finish them.
  drive({w}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  v1::ListCandidatesRequest req;
  req.set_run_id(run.run_id());
  auto all = coord_->list_candidates(req);
  EXPECT_EQ(all.matched(), 4);
  ASSERT_EQ(all.candidates_size(), 4);
  EXPECT_EQ(all.seed_genome(), all.candidates(0).genome()) << "generation 0 leads with the seed genome";
  EXPECT_EQ(all.candidates(0).parents(), "seed()");
  for (const auto& c : all.candidates()) {
    EXPECT_EQ(c.phase(), v1::CANDIDATE_STATE_DONE);
    EXPECT_EQ(c.state(), "done") << "and its label, for an older evoctl";
    EXPECT_EQ(c.result_from(), v1::RESULT_SOURCE_MEASURED);
    EXPECT_EQ(c.result_source(), "measured");
    EXPECT_TRUE(c.evaluation().resources().ptxas_log().empty()) << "kilobytes per candidate stay home";
  }
  req.set_failed_only(true);
  auto failed = coord_->list_candidates(req);
  ASSERT_EQ(failed.candidates_size(), 2);
  for (const auto& c : failed.candidates()) {
    EXPECT_TRUE(c.failed());
    EXPECT_EQ(c.fitness_us(), 0);
    EXPECT_EQ(c.evaluation().status(), v1::RESOURCE_REJECT);
    EXPECT_EQ(c.evaluation().gates(0).kind(), v1::GATE_COMPILE) << "the store maps an older worker's labels";
    EXPECT_EQ(c.evaluation().gates(0).outcome(), v1::VERDICT_FAILED);
    EXPECT_EQ(c.evaluation().gates(0).gate(), "compile");
  }
  EXPECT_EQ(failed.candidates(0).candidate_id(), all.candidates(1).candidate_id());
  req.set_failed_only(false);
  req.set_limit(3);
  auto latest = coord_->list_candidates(req);
  EXPECT_EQ(latest.matched(), 4);
  ASSERT_EQ(latest.candidates_size(), 3);
  EXPECT_EQ(latest.candidates(0).candidate_id(), all.candidates(1).candidate_id()) << "the latest three";
  req.set_run_id("run-9999");
  EXPECT_EQ(code_of([&] { coord_->list_candidates(req); }), Code::kNotFound);
}

// When each candidate finished (evoctl report's wall-time plot): the time its final evaluation was
// stored; 0 until it is done. A would-be elite is done at its confirmation, not its first report.
TEST_F(CoordinatorTest, ListCandidatesSaysWhenEachCandidateFinished) {
  auto w = add_worker("sm_90a/model/estimated", true);
  auto run = submit(1, 2, 1);
  auto granted = lease(w, 2);
  ASSERT_EQ(granted.leases_size(), 2);
  auto refused = evaluation(granted.leases(0), "sm_90a/model/estimated", 1.0, true);
  refused.set_status(v1::RESOURCE_REJECT);
  refused.set_message("register spills");
  refused.clear_fitness_us();
  set_gate_forms(*refused.add_gates(), v1::GATE_COMPILE, v1::VERDICT_FAILED);
  now_ += 500;
  report(w, granted.leases(0), refused);
  const int64_t refused_at = now_;
  now_ += 500;
  report(w, granted.leases(1), evaluation(granted.leases(1), "sm_90a/model/estimated", 1.0, true));
  const int64_t first_report_at = now_;
  v1::ListCandidatesRequest req;
  req.set_run_id(run.run_id());
  auto listed = coord_->list_candidates(req);
  ASSERT_EQ(listed.candidates_size(), 2);
  EXPECT_EQ(listed.candidates(0).done_unix_ms(), refused_at);
  EXPECT_EQ(listed.candidates(1).done_unix_ms(), 0) << "awaiting its confirmation: not done";
  now_ += 1000;
  const int64_t confirming_from = now_;
  drive({w}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  listed = coord_->list_candidates(req);
  ASSERT_EQ(listed.candidates_size(), 2);
  EXPECT_EQ(listed.candidates(1).phase(), v1::CANDIDATE_STATE_DONE);
  EXPECT_GE(listed.candidates(1).done_unix_ms(), confirming_from) << "first reported at " << first_report_at;
  EXPECT_LE(listed.candidates(1).done_unix_ms(), now_);
  EXPECT_EQ(listed.candidates(0).done_unix_ms(), refused_at) << "unchanged";
}

TEST_F(CoordinatorTest, ListWorkersShowsTheLiveOnesWithTheirLeasesAndTheGoneOnesWhenAsked) {
  auto gpu = add_worker("sm_90a/Fake");
  now_ += 5000;  // the first worker goes quiet past the liveness window (three thirds of the TTL)
  auto model = add_worker("sm_90a/model/estimated", true);
  submit(1, 4, 2);
  ASSERT_EQ(lease(model, 2).leases_size(), 2);
  v1::ListWorkersRequest req;
  auto live = coord_->list_workers(req);
  EXPECT_EQ(live.now_unix_ms(), now_);
  ASSERT_EQ(live.workers_size(), 1);
  EXPECT_EQ(live.workers(0).worker_id(), model);
  EXPECT_TRUE(live.workers(0).live());
  EXPECT_EQ(live.workers(0).active_leases(), 2);
  EXPECT_EQ(live.workers(0).backend(), "model");
  EXPECT_EQ(live.workers(0).device_class(), "sm_90a/model/estimated");
  req.set_include_gone(true);
  auto all = coord_->list_workers(req);
  ASSERT_EQ(all.workers_size(), 2);
  EXPECT_EQ(all.workers(0).worker_id(), model) << "live ones first";
  EXPECT_EQ(all.workers(1).worker_id(), gpu);
  EXPECT_FALSE(all.workers(1).live());
  EXPECT_EQ(all.workers(1).active_leases(), 0);
  EXPECT_EQ(all.workers(1).last_seen_unix_ms(), now_ - 5000);
}

// The cache answers a later run with what two workers agreed on (the confirmed elites), and with
// nothing one worker said alone: those genomes are measured again.
TEST_F(CoordinatorTest, SameRngSeedGivesTheSameGenomesAndTheCacheAnswersWhatTwoWorkersAgreedOn) {
  auto w = add_worker("sm_90a/model/estimated", true), v = add_worker("sm_90a/model/estimated", true);
  auto first = submit(3, 6, 2, 42);
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  auto second = submit(3, 6, 2, 42);
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  EXPECT_EQ(coord_->status(second.run_id()).run().state(), v1::DONE);
  auto a = store_.candidates_of_run(first.run_id()), b = store_.candidates_of_run(second.run_id());
  ASSERT_EQ(a.size(), b.size());
  int cached = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].genome, b[i].genome) << i;
    const bool agreed = a[i].elite_eligible && !a[i].self_confirmed;
    EXPECT_EQ(b[i].result_source, agreed ? v1::RESULT_SOURCE_CACHE : v1::RESULT_SOURCE_MEASURED) << i;
    cached += agreed;
  }
  EXPECT_GT(cached, 0);
  v1::LeaderboardRequest lr;
  lr.set_run_id(second.run_id());
  auto board = coord_->leaderboard(lr);
  ASSERT_EQ(board.elites_size(), 2);
  EXPECT_TRUE(board.elites(0).estimated());
}

TEST_F(CoordinatorTest, TheCacheNeverAnswersForAnotherProblem) {
  auto w = add_worker("sm_90a/model/estimated", true), v = add_worker("sm_90a/model/estimated", true);
  submit(2, 6, 2, 42, "1x8x512x64");
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  EXPECT_GT(cache_entries(), 0) << "the first run cached what two workers agreed on";
  // The same genomes (same seed) on a bigger problem: every one must be measured again.
  auto bigger = submit(2, 6, 2, 42, "16x16x512x64");
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  for (const auto& c : store_.candidates_of_run(bigger.run_id()))
    EXPECT_EQ(c.result_source, v1::RESULT_SOURCE_MEASURED);
}

// The dtype rides in the shape text, and so in the cache's problem key: a genome timed on fp16 says
// nothing about bf16. Runs until fa_s512_v3's space lists bf16 are refused at submit (above).
TEST_F(CoordinatorTest, TheCacheNeverAnswersForAnotherDtype) {
  const auto& served = SearchSpace::for_template("fa_s512_v3").served().at("DTYPE");
  if (std::find(served.begin(), served.end(), static_cast<int64_t>(DType::kBF16)) == served.end())
    GTEST_SKIP() << "fa_s512_v3 does not serve bf16 yet";
  auto w = add_worker("sm_90a/model/estimated", true), v = add_worker("sm_90a/model/estimated", true);
  submit(2, 6, 2, 42, "1x8x512x64");
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  EXPECT_GT(cache_entries(), 0) << "the first run cached what two workers agreed on";
  auto bf16 = submit(2, 6, 2, 42, "1x8x512x64:bf16");
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  for (const auto& c : store_.candidates_of_run(bf16.run_id()))
    EXPECT_EQ(c.result_source, v1::RESULT_SOURCE_MEASURED);
}

// Fitness inputs resident: candidates rank by the geometric mean of their shapes' resident
// times, not by the worker's fitness (inputs cycled past L2); a report that lacks a resident time
// is refused and changes nothing; and such a fitness never answers, from the cache, for a run
// that ranks by rotated inputs.
TEST_F(CoordinatorTest, AResidentRunRanksByResidentTimes) {
  auto w = add_worker("sm_90a/Fake");
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.add_shapes("1x8x512x64");
  req.add_shapes("2x8x512x64");
  req.set_generations(1);
  req.set_population(4);
  req.set_top_k(2);
  req.set_rng_seed(5);
  req.set_fitness_from(v1::FITNESS_INPUTS_RESIDENT);
  const auto run = coord_->submit(req);
  EXPECT_EQ(run.fitness_from(), v1::FITNESS_INPUTS_RESIDENT);
  EXPECT_EQ(run.fitness_inputs(), "resident") << "and its label, for an older evoctl";
  // Resident times 1/4 and 1/16 of the worker's fitness: their geometric mean is 1/8 of it.
  auto with_resident = [&](const v1::Lease& l) {
    v1::Evaluation e = evaluation(l, "sm_90a/Fake", 1.0);
    for (double part : {0.25, 0.0625}) e.add_shapes()->set_resident_us(e.fitness_us() * part);
    return e;
  };
  bool refused_once = false;
  for (int idle = 0; idle < 2;) {
    auto granted = lease(w, 2);
    idle = granted.leases().empty() ? idle + 1 : 0;
    for (const auto& l : granted.leases()) {
      if (!refused_once) {
        const std::string before = store_.dump();
        v1::Evaluation lacking = with_resident(l);
        lacking.mutable_shapes(1)->set_resident_us(0);
        EXPECT_EQ(code_of([&] { report(w, l, lacking); }), Code::kInvalidArgument);
        EXPECT_EQ(store_.dump(), before);
        refused_once = true;
      }
      report(w, l, with_resident(l));
    }
    now_ += 10;
  }
  v1::LeaderboardRequest lr;
  lr.set_run_id(run.run_id());
  auto board = coord_->leaderboard(lr);
  ASSERT_EQ(board.elites_size(), 2);
  for (const auto& e : board.elites())
    EXPECT_NEAR(e.fitness_us(), fake_us(e.genome()) / 8, 1e-9) << e.genome();
  EXPECT_LE(board.elites(0).fitness_us(), board.elites(1).fitness_us());

  // The same genomes in a run that ranks by rotated inputs: all measured again.
  req.clear_fitness_from();
  const auto rotated = coord_->submit(req);
  EXPECT_EQ(rotated.fitness_from(), v1::FITNESS_INPUTS_ROTATED);
  EXPECT_EQ(rotated.fitness_inputs(), "rotated");
  EXPECT_GT(drive({w}, "sm_90a/Fake", [](const v1::Lease&) { return 1.0; }), 0);
  for (const auto& c : store_.candidates_of_run(rotated.run_id()))
    EXPECT_EQ(c.result_source, v1::RESULT_SOURCE_MEASURED);
}

// A database kept across an upgrade: its cached times were measured on the template's old code,
// and one genome names another kernel once that code changes. Here the rows are rewritten as an
// older build of the template would have keyed them; none of them may answer for this one.
TEST_F(CoordinatorTest, TheCacheNeverAnswersForAnotherVersionOfTheTemplate) {
  auto w = add_worker("sm_90a/model/estimated", true), v = add_worker("sm_90a/model/estimated", true);
  submit(2, 6, 2, 42);
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  {
    SqliteConnection db(dir_.file("evo.db"));
    db.exec("UPDATE result_cache SET toolkit = replace(toolkit, '@', '@0ld')");
    EXPECT_GT(db.total_changes(), 0) << "the cache key names the template's code";
  }
  auto again = submit(2, 6, 2, 42);
  drive({w, v}, "sm_90a/model/estimated", [](const v1::Lease&) { return 1.0; }, true);
  for (const auto& c : store_.candidates_of_run(again.run_id()))
    EXPECT_EQ(c.result_source, v1::RESULT_SOURCE_MEASURED);
}

// Two runs at once share one worker in turn; the older does not take every lease until it is done.
TEST_F(CoordinatorTest, ConcurrentRunsTakeTurnsOnTheWorkers) {
  const std::string w = add_worker("sm_90a/H100");
  const std::string first = submit(2, 4, 2, 7, "1x8x512x64").run_id();
  const std::string second = submit(2, 4, 2, 8, "2x8x512x64").run_id();
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) {
    const auto granted = lease(w, 1);
    ASSERT_EQ(granted.leases_size(), 1);
    order.push_back(granted.leases(0).run_id());
    report(w, granted.leases(0), evaluation(granted.leases(0), "sm_90a/H100", 1.0));
    now_ += 10;
  }
  EXPECT_EQ(order, (std::vector<std::string>{first, second, first, second, first, second}));
}

TEST_F(CoordinatorTest, CancelledRunHandsOutNothing) {
  auto w = add_worker("sm_90a/Fake");
  auto run = submit(2, 4, 2);
  EXPECT_EQ(coord_->cancel(run.run_id()).state(), v1::CANCELLED);
  EXPECT_EQ(lease(w, 4).leases_size(), 0);
}

}  // namespace
}  // namespace evo

namespace evo {
namespace {

// Break 8: every lease poll, even an empty one, woke every watcher.
TEST_F(CoordinatorTest, AnEmptyLeasePollWakesNoWatcher) {
  auto a = add_worker("sm_90a/Fake");
  const uint64_t before = coord_->change_count();
  EXPECT_EQ(lease(a).leases_size(), 0);
  EXPECT_EQ(coord_->change_count(), before) << "nothing changed";
  submit(1, 1, 1);
  const uint64_t submitted = coord_->change_count();
  EXPECT_EQ(lease(a).leases_size(), 1);
  EXPECT_GT(coord_->change_count(), submitted) << "a granted lease is a change";
}

// Break 8: each watcher rebuilt the run's whole status under the store lock at every change.
TEST_F(CoordinatorTest, WatchersShareOneStatusComputationPerChange) {
  auto a = add_worker("sm_90a/model/estimated", true);
  auto run = submit(1, 2, 1);
  std::vector<std::thread> watchers;
  for (int i = 0; i < 50; ++i)
    watchers.emplace_back([&] { EXPECT_EQ(coord_->watched_status(run.run_id()).run().run_id(), run.run_id()); });
  for (auto& t : watchers) t.join();
  EXPECT_EQ(coord_->watched_status_builds(), 1u);
  auto l = lease(a).leases(0);
  auto failed = evaluation(l, "sm_90a/model/estimated", 1.0, true);  // a failure is final at once
  failed.set_status(v1::RESOURCE_REJECT);
  failed.clear_fitness_us();
  report(a, l, failed);
  watchers.clear();
  for (int i = 0; i < 50; ++i)
    watchers.emplace_back([&] { EXPECT_EQ(coord_->watched_status(run.run_id()).evaluations_done(), 1); });
  for (auto& t : watchers) t.join();
  EXPECT_EQ(coord_->watched_status_builds(), 2u) << "one more for the one change";
}

}  // namespace
}  // namespace evo
