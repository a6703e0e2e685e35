// The run lifecycle's own contract: a generation is bred only once every candidate of the current
// one is done, the last one ends the run, the first lease starts it and cancelling leaves an
// ended run as it ended.
#include <gtest/gtest.h>
#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <tuple>
#include <vector>

#include "device_limits.h"
#include "manager_fixture.h"
#include "run_views.h"
#include "wire_labels.h"
#include "search_space.h"

namespace evo {
namespace {

using test::ManagerTest;

class RunLifecycleTest : public ManagerTest {
 protected:
  // Records a result for the candidate, as a report would, without a lease.
  void finish(const CandidateRecord& c, double fitness_us) {
    store_.transaction([&] {
      EvaluationRecord e;
      e.candidate_id = c.id;
      e.worker_id = "w-test";
      e.created_ms = now_;
      e.evaluation.set_status(v1::OK);
      e.evaluation.set_fitness_us(fitness_us);
      store_.finish_candidate(c.id, store_.insert_evaluation(e), v1::OK, fitness_us, 0, true,
                              v1::RESULT_SOURCE_MEASURED);
    });
  }
  void advance(const std::string& run_id) {
    store_.transaction([&] { runs_.advance_if_generation_complete(run_id); });
  }
  std::vector<CandidateRecord> of_generation(const std::string& run_id, int generation) {
    std::vector<CandidateRecord> out;
    for (auto& c : store_.candidates_of_run(run_id))
      if (c.generation == generation) out.push_back(c);
    return out;
  }
};

TEST_F(RunLifecycleTest, AGenerationIsBredOnceItsLastCandidateIsDoneAndTheLastEndsTheRun) {
  const RunRecord run = submit(2, 3, 1);
  EXPECT_EQ(run.state, v1::QUEUED);
  auto gen0 = of_generation(run.id, 0);
  ASSERT_EQ(gen0.size(), 3u);
  finish(gen0[0], 60);
  finish(gen0[1], 70);
  advance(run.id);
  EXPECT_EQ(store_.get_run(run.id)->current_generation, 0) << "one candidate is still queued";
  EXPECT_TRUE(of_generation(run.id, 1).empty());
  finish(gen0[2], 80);
  advance(run.id);
  EXPECT_EQ(store_.get_run(run.id)->current_generation, 1);
  auto gen1 = of_generation(run.id, 1);
  ASSERT_EQ(gen1.size(), 3u);
  EXPECT_EQ(gen1[0].seq, 3) << "seq goes on across generations";
  EXPECT_EQ(store_.get_run(run.id)->state, v1::QUEUED);
  for (const auto& c : gen1) finish(c, 50);
  advance(run.id);
  EXPECT_EQ(store_.get_run(run.id)->state, v1::DONE);
  EXPECT_TRUE(of_generation(run.id, 2).empty()) << "a run of two generations breeds no third";
}

TEST_F(RunLifecycleTest, TheFirstLeaseFixesTheClassAndStartsTheRunOnlyFromQueued) {
  RunRecord run = submit(1, 2, 1);
  store_.transaction([&] {
    runs_.fix_device_class(run, "sm_90a/Fake");
    runs_.mark_running(run);
  });
  EXPECT_EQ(run.device_class, "sm_90a/Fake");
  EXPECT_EQ(run.state, v1::RUNNING);
  EXPECT_EQ(store_.get_run(run.id)->device_class, "sm_90a/Fake");
  EXPECT_EQ(store_.get_run(run.id)->state, v1::RUNNING);
  RunRecord cancelled = runs_.cancel(submit(1, 2, 1).id);
  store_.transaction([&] { runs_.mark_running(cancelled); });
  EXPECT_EQ(store_.get_run(cancelled.id)->state, v1::CANCELLED) << "a lease never revives an ended run";
}

TEST_F(RunLifecycleTest, CancellingAnEndedRunLeavesItAsItEnded) {
  const RunRecord run = submit(1, 1, 1);
  finish(of_generation(run.id, 0)[0], 60);
  advance(run.id);
  ASSERT_EQ(store_.get_run(run.id)->state, v1::DONE);
  const std::string before = store_.dump();
  const RunRecord after = runs_.cancel(run.id);
  EXPECT_EQ(after.state, v1::DONE);
  EXPECT_EQ(store_.dump(), before);
  const RunRecord queued = submit(1, 1, 1);
  EXPECT_EQ(runs_.cancel(queued.id).state, v1::CANCELLED);
  EXPECT_EQ(store_.get_run(queued.id)->message, "cancelled by request");
}

// --- budgets: the run ends DONE at the first one spent, with its elites, and says which.

class BudgetTest : public RunLifecycleTest {
 protected:
  RunRecord submit_with(int generations, int population, int64_t budget_ms, int max_evals, int patience,
                        double target_us = 0) {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.set_generations(generations);
    req.set_population(population);
    req.set_top_k(1);
    req.set_rng_seed(7);
    req.set_budget_ms(budget_ms);
    req.set_max_evals(max_evals);
    req.set_patience(patience);
    req.set_target_us(target_us);
    return runs_.submit(req);
  }
  // Finishes every candidate of the run's current generation at `fitness_us`, then advances.
  void finish_generation(const std::string& run_id, double fitness_us) {
    for (const auto& c : of_generation(run_id, store_.get_run(run_id)->current_generation))
      if (c.state != v1::CANDIDATE_STATE_DONE) finish(c, fitness_us);
    advance(run_id);
  }
  void start(RunRecord& run) {
    store_.transaction([&] { runs_.mark_running(run); });
  }
};

TEST_F(BudgetTest, AnUntouchedRunEndsAfterItsGenerationsAndSaysSo) {
  const RunRecord run = submit_with(2, 2, 0, 0, 0);
  finish_generation(run.id, 50);
  finish_generation(run.id, 40);
  const RunRecord after = *store_.get_run(run.id);
  EXPECT_EQ(after.state, v1::DONE);
  EXPECT_EQ(after.stop_reason, v1::STOP_REASON_GENERATIONS_DONE);
}

TEST_F(BudgetTest, MaxEvalsCutsTheLastGenerationToFitAndEndsTheRun) {
  const RunRecord run = submit_with(10, 4, 0, 6, 0);
  EXPECT_EQ(of_generation(run.id, 0).size(), 4u);
  finish_generation(run.id, 50);
  ASSERT_EQ(of_generation(run.id, 1).size(), 2u) << "six evaluations in all: four, then two";
  finish_generation(run.id, 40);
  const RunRecord after = *store_.get_run(run.id);
  EXPECT_EQ(after.state, v1::DONE);
  EXPECT_EQ(after.stop_reason, v1::STOP_REASON_MAX_EVALS);
  EXPECT_EQ(after.message, "max_evals 6 reached");
  EXPECT_EQ(store_.candidates_of_run(run.id).size(), 6u);
  // Fewer than one generation: generation 0 is cut too.
  EXPECT_EQ(of_generation(submit_with(10, 4, 0, 3, 0).id, 0).size(), 3u);
}

TEST_F(BudgetTest, PatienceEndsTheRunAfterGenerationsWithoutABetterTime) {
  const RunRecord run = submit_with(20, 2, 0, 0, 2);
  finish_generation(run.id, 50);
  finish_generation(run.id, 40);  // better
  finish_generation(run.id, 45);  // not better: 1
  EXPECT_EQ(store_.get_run(run.id)->state, v1::QUEUED);
  finish_generation(run.id, 40);  // equal is not better: 2
  const RunRecord after = *store_.get_run(run.id);
  EXPECT_EQ(after.state, v1::DONE);
  EXPECT_EQ(after.stop_reason, v1::STOP_REASON_NO_IMPROVEMENT);
  EXPECT_EQ(after.current_generation, 3);
  EXPECT_EQ(after.message, "no better time in the last 2 generations (patience 2)");
}

TEST_F(BudgetTest, TheWallTimeBudgetCountsFromTheFirstLeaseAndEndsTheRunMidGeneration) {
  RunRecord run = submit_with(20, 4, 60'000, 0, 0);
  now_ += 3'600'000;  // queued for an hour: no budget spent
  EXPECT_EQ(in_transaction([&] { return runs_.end_spent_budgets(); }), 0);
  start(run);
  EXPECT_EQ(store_.get_run(run.id)->started_ms, now_);
  finish(of_generation(run.id, 0)[0], 50);
  now_ += 59'999;
  EXPECT_EQ(in_transaction([&] { return runs_.end_spent_budgets(); }), 0);
  now_ += 1;
  EXPECT_EQ(in_transaction([&] { return runs_.end_spent_budgets(); }), 1);
  const RunRecord after = *store_.get_run(run.id);
  EXPECT_EQ(after.state, v1::DONE);
  EXPECT_EQ(after.stop_reason, v1::STOP_REASON_BUDGET_SPENT);
  EXPECT_EQ(after.message, "budget of 1m spent");
  EXPECT_EQ(in_transaction([&] { return runs_.end_spent_budgets(); }), 0) << "an ended run is not ended twice";
  // A generation that completes after the budget passed breeds no next one.
  RunRecord late = submit_with(20, 2, 1'000, 0, 0);
  start(late);
  now_ += 1'000;
  finish_generation(late.id, 50);
  EXPECT_EQ(store_.get_run(late.id)->stop_reason, v1::STOP_REASON_BUDGET_SPENT);
  EXPECT_TRUE(of_generation(late.id, 1).empty());
}

TEST_F(BudgetTest, ATargetEndsTheRunOnceAnEliteIsConfirmedAtOrUnderItMidGeneration) {
  const RunRecord run = submit_with(20, 4, 0, 0, 0, 45);
  const auto gen0 = of_generation(run.id, 0);
  ASSERT_EQ(gen0.size(), 4u);
  finish(gen0[0], 50);
  advance(run.id);
  EXPECT_EQ(store_.get_run(run.id)->state, v1::QUEUED) << "50 µs is over the target";
  // Faster, but on one measurement, outside the elites: not a time the run believes.
  store_.transaction([&] {
    EvaluationRecord e;
    e.candidate_id = gen0[1].id;
    e.worker_id = "w-test";
    e.evaluation.set_status(v1::OK);
    e.evaluation.set_fitness_us(30);
    store_.finish_candidate(gen0[1].id, store_.insert_evaluation(e), v1::OK, 30.0, 0, false,
                            v1::RESULT_SOURCE_MEASURED);
  });
  advance(run.id);
  EXPECT_EQ(store_.get_run(run.id)->state, v1::QUEUED) << "an unconfirmed time reaches no target";
  finish(gen0[2], 45);
  advance(run.id);
  const RunRecord after = *store_.get_run(run.id);
  EXPECT_EQ(after.state, v1::DONE) << "at the target, with a candidate of the generation still queued";
  EXPECT_EQ(after.stop_reason, v1::STOP_REASON_TARGET_REACHED);
  EXPECT_EQ(after.message, "target of 45.000 µs reached: candidate " + gen0[2].id + " confirmed at 45.000 µs");
  EXPECT_EQ(after.target_us, 45);
  EXPECT_EQ(RunViews(store_, workers_, clock()).status(run.id).run().target_us(), 45);
  EXPECT_TRUE(of_generation(run.id, 1).empty());
}

TEST_F(BudgetTest, ATargetThatIsNotAPositiveTimeIsRefusedAndStoresNothing) {
  const std::string before = store_.dump();
  for (double target : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    try {
      submit_with(3, 4, 0, 0, 0, target);
      ADD_FAILURE() << target;
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), CoordinatorError::Code::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()), fmt::format("target_us must be a positive time in µs (0: none), got {}", target));
    }
  }
  EXPECT_EQ(store_.dump(), before);
}

// Throughput counts from the first lease: candidates done per minute, and the GPU gates' time
// (correctness, sanitizer, timing; not the compile) over the wall time; it stops at the run's end.
TEST_F(BudgetTest, StatusCountsEvaluationsPerMinuteAndTheGpuShareFromTheFirstLease) {
  const std::string w = add_worker("sm_90a/model/estimated", true);
  const RunRecord run = submit_with(1, 1, 0, 0, 0);
  RunViews views(store_, workers_, clock());
  EXPECT_FALSE(views.status(run.id).has_evaluations_per_minute()) << "queued: nothing to count yet";
  // The measurement and its confirmation, each through the correctness, sanitizer and timing gates.
  auto report_with_gates = [&](const v1::Lease& l) {
    v1::Evaluation e;
    e.set_status(v1::OK);
    e.set_fitness_us(50);
    e.set_estimated(true);
    *e.mutable_device() = test::fake_device("sm_90a/model/estimated", true);
    for (auto [kind, ms] : std::vector<std::pair<v1::Gate, double>>{
             {v1::GATE_COMPILE, 5000}, {v1::GATE_CORRECT, 300}, {v1::GATE_SANITIZER, 1000}, {v1::GATE_TIMED, 200}}) {
      auto* g = e.add_gates();
      set_gate_forms(*g, kind, v1::VERDICT_PASSED);
      g->set_elapsed_ms(ms);
    }
    ASSERT_TRUE(report_evaluation(w, l, std::move(e)).accepted());
  };
  auto first = lease(w);
  ASSERT_EQ(first.leases_size(), 1);
  now_ += 60'000;
  report_with_gates(first.leases(0));
  auto confirmation = lease(w);
  ASSERT_EQ(confirmation.leases_size(), 1);
  report_with_gates(confirmation.leases(0));
  ASSERT_EQ(store_.get_run(run.id)->state, v1::DONE);
  now_ += 3'600'000;  // an hour after the end: the figures stay those of the run's own time
  const v1::RunStatus st = views.status(run.id);
  EXPECT_DOUBLE_EQ(st.evaluations_per_minute(), 1.0);
  EXPECT_DOUBLE_EQ(st.gpu_share(), 2 * 1500.0 / 60'000);
}

TEST_F(BudgetTest, NegativeBudgetsAreRefusedAndStoreNothing) {
  const std::string before = store_.dump();
  for (auto [budget, evals, patience, why] :
       std::vector<std::tuple<int64_t, int, int, std::string>>{{-1, 0, 0, "budget must be positive (0: none), got -1 ms"},
                                                               {0, -2, 0, "max_evals must be positive (0: none), got -2"},
                                                               {0, 0, -3, "patience must be positive (0: none), got -3"}}) {
    try {
      submit_with(3, 4, budget, evals, patience);
      ADD_FAILURE() << why;
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), CoordinatorError::Code::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
  EXPECT_EQ(store_.dump(), before);
}

TEST_F(BudgetTest, CancelAndExhaustionSayWhy) {
  EXPECT_EQ(runs_.cancel(submit_with(3, 2, 0, 0, 0).id).stop_reason, v1::STOP_REASON_CANCELLED);
  EXPECT_EQ(store_.get_run(submit_with(3, 2, 0, 0, 0).id)->stop_reason, v1::STOP_REASON_UNSPECIFIED)
      << "a running run has no stop reason";
}

}  // namespace
}  // namespace evo

namespace evo {
namespace {

using test::ManagerTest;

class SubmitTest : public ManagerTest {
 protected:
  v1::SubmitRunRequest request(v1::SearchStrategy strategy, const std::string& request_id = "") {
    v1::SubmitRunRequest req;
    req.set_seed("fa_s512_v3");
    req.set_generations(3);
    req.set_population(4);
    req.set_top_k(1);
    req.set_search_strategy(strategy);
    req.set_request_id(request_id);
    return req;
  }
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
};

// Break 7: evoctl gave up on a slow submit and retried it; the first had made a run all the same.
TEST_F(SubmitTest, ARetriedSubmitReturnsTheRunTheFirstMadeAndStoresNothing) {
  const RunRecord first = runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE, "req-1"));
  const std::string after_first = store_.dump();
  const RunRecord again = runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE, "req-1"));
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(store_.dump(), after_first);
  const RunRecord other = runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE, "req-2"));
  EXPECT_NE(other.id, first.id);
  const RunRecord unnamed = runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE));
  EXPECT_NE(runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE)).id, unnamed.id) << "no id: every submit is a run";
  EXPECT_EQ(store_.get_run(first.id)->request_id, "req-1");
}

// A submit that names no strategy gets the surrogate: of the strategies it searched best on the GPU
// (bench/NOTES.md, "Search quality").
TEST_F(SubmitTest, ASubmitWithoutAStrategyRunsTheSurrogate) {
  const RunRecord run = runs_.submit(request(v1::SEARCH_STRATEGY_UNSPECIFIED));
  EXPECT_EQ(store_.get_run(run.id)->strategy, v1::SEARCH_STRATEGY_SURROGATE);
  const RunRecord named = runs_.submit(request(v1::SEARCH_STRATEGY_EVOLVE));
  EXPECT_EQ(store_.get_run(named.id)->strategy, v1::SEARCH_STRATEGY_EVOLVE) << "a named strategy is kept";
}

// Break 7: an exhaustive submit listed the whole space (38-49 s of CPU) before it answered.
TEST_F(SubmitTest, AnExhaustiveSubmitIsAnsweredWithinASecond) {
  const auto started = std::chrono::steady_clock::now();
  const RunRecord run = runs_.submit(request(v1::SEARCH_STRATEGY_EXHAUSTIVE, "req-x"));
  EXPECT_LT(seconds_since(started), 1.0);
  EXPECT_EQ(store_.count_candidates(run.id, 0, false), 4) << "generation 0 found by walking the space";
}

// Break 5: after a restart, the first exhaustive generation bred listed every valid genome inside
// the report's transaction, holding the store lock 44-52 s. The run is stored as the previous
// evod process left it: generation 0 proposed, this process has listed nothing.
TEST_F(SubmitTest, AnExhaustiveGenerationBredAfterARestartDoesNotListTheSpaceInsideTheReport) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  RunRecord run;
  run.id = "run-0001";
  run.seed = "fa_s512_v3";
  run.shapes = {"1x8x512x64"};
  run.generations = 3;
  run.population = 4;
  run.top_k = 1;
  run.strategy = v1::SEARCH_STRATEGY_EXHAUSTIVE;
  run.smem_limit = kDefaultSmemLimit;
  run.created_ms = now_;
  store_.transaction([&] {
    store_.insert_run(run);
    for (int i = 0; i < run.population; ++i) {
      const Genome g = i == 0 ? space.default_genome() : space.at(static_cast<uint64_t>(i));
      CandidateRecord c;
      c.id = run.id + "-c000" + std::to_string(i);
      c.run_id = run.id;
      c.seq = i;
      c.genome = g.text();
      c.genome_hash = g.hash();
      c.op = "exhaustive";
      store_.insert_candidate(c);
    }
  });
  const std::string w = add_worker("sm_90a/model/estimated", true);  // alone: it confirms its own elites
  const auto granted = lease(w, run.population);
  ASSERT_EQ(granted.leases_size(), run.population);
  double slowest = 0;
  for (const auto& l : granted.leases()) {
    const auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE(report(w, l, "sm_90a/model/estimated", 900.0, true).accepted());
    slowest = std::max(slowest, seconds_since(started));
  }
  // The would-be elites' confirmations complete generation 0.
  const auto confirmations = lease(w, run.population);
  ASSERT_GT(confirmations.leases_size(), 0);
  for (const auto& l : confirmations.leases()) {
    const auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE(report(w, l, "sm_90a/model/estimated", 900.0, true).accepted());
    slowest = std::max(slowest, seconds_since(started));
  }
  EXPECT_LT(slowest, 2.0) << "the report that completed generation 0 held the store lock";
  // Generation 1 is bred now (a short walk of the space), or by the sweeper once the list is built.
  for (int i = 0; i < 600 && store_.count_candidates(run.id, 1, false) == 0; ++i) {
    store_.transaction([&] { runs_.breed_waiting_generations(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(store_.count_candidates(run.id, 1, false), run.population);
  EXPECT_EQ(store_.get_run(run.id)->current_generation, 1);
}

}  // namespace
}  // namespace evo
