// The run lifecycle's own contract: a generation is bred only once every candidate of the current
// one is done, the last one ends the run, the first lease starts it and cancelling leaves an
// ended run as it ended.
#include <gtest/gtest.h>

#include "manager_fixture.h"

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

}  // namespace
}  // namespace evo
