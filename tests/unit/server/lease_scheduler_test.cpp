// The lease scheduler's own contract: runs take turns, a request takes what a run's queue holds
// (read again after cache answers bred a generation), confirmations go to another live worker,
// and a heartbeat renews only the leases its worker holds.
#include <gtest/gtest.h>

#include <vector>

#include "manager_fixture.h"

namespace evo {
namespace {

using test::ManagerTest;

std::vector<std::string> ids(const std::vector<RunRecord>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.id);
  return out;
}

TEST(RunTurnsTest, TheTurnPassesToTheRunAfterTheOneLastLeasedAndBackToTheOldest) {
  std::vector<RunRecord> runs(3);
  runs[0].id = "run-0001";
  runs[1].id = "run-0002";
  runs[2].id = "run-0003";
  RunTurns turns;
  using Ids = std::vector<std::string>;
  EXPECT_EQ(ids(turns.in_turn(runs)), (Ids{"run-0001", "run-0002", "run-0003"})) << "no lease yet: oldest first";
  turns.leased("run-0002");
  EXPECT_EQ(ids(turns.in_turn(runs)), (Ids{"run-0003", "run-0001", "run-0002"}));
  turns.leased("run-0003");
  EXPECT_EQ(ids(turns.in_turn(runs)), (Ids{"run-0001", "run-0002", "run-0003"}));
  turns.leased("run-0009");  // ended since: no longer among the active runs
  EXPECT_EQ(ids(turns.in_turn(runs)), (Ids{"run-0001", "run-0002", "run-0003"}));
}

class LeaseSchedulerTest : public ManagerTest {};

TEST_F(LeaseSchedulerTest, ARequestTakesWhatARunHoldsThenGoesOnToTheNext) {
  const std::string w = add_worker("sm_90a/Fake");
  const RunRecord first = submit(1, 2, 1, 7, "1x8x512x64");
  const RunRecord second = submit(1, 2, 1, 8, "2x8x512x64");
  const auto granted = lease(w, 3);
  ASSERT_EQ(granted.leases_size(), 3);
  EXPECT_EQ(granted.leases(0).run_id(), first.id);
  EXPECT_EQ(granted.leases(1).run_id(), first.id);
  EXPECT_EQ(granted.leases(2).run_id(), second.id);
  // The turn is the first run's again, which has nothing queued: the second's last candidate.
  const auto rest = lease(w, 3);
  ASSERT_EQ(rest.leases_size(), 1);
  EXPECT_EQ(rest.leases(0).run_id(), second.id);
  EXPECT_EQ(lease(w, 3).leases_size(), 0);
  for (const auto& id : {first.id, second.id})
    EXPECT_EQ(store_.get_run(id)->state, v1::RUNNING) << id << ": its first lease started it";
}

TEST_F(LeaseSchedulerTest, CacheAnswersThatBreedTheNextGenerationAreFollowedByItsLeases) {
  const std::string w = add_worker("sm_90a/model/estimated", true);
  submit(1, 4, 2, 42);
  const auto measured = lease(w, 4);
  ASSERT_EQ(measured.leases_size(), 4);
  for (int i = 0; i < 4; ++i)
    report(w, measured.leases(i), "sm_90a/model/estimated", 50.0 + i, true);
  // The same seed proposes the same generation 0, which the cache answers whole: that completes
  // it, breeds generation 1, and the one request goes on to lease from it.
  const RunRecord again = submit(2, 4, 2, 42);
  const auto granted = lease(w, 4);
  ASSERT_EQ(granted.leases_size(), 4);
  for (const auto& l : granted.leases()) {
    EXPECT_EQ(l.run_id(), again.id);
    EXPECT_EQ(store_.get_candidate(l.candidate_id())->generation, 1) << l.candidate_id();
  }
  EXPECT_EQ(store_.get_run(again.id)->current_generation, 1);
}

TEST_F(LeaseSchedulerTest, AConfirmationWaitsForAnotherLiveWorkerUntilItGoesSilent) {
  const std::string a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  const auto first = lease(a);
  ASSERT_EQ(first.leases_size(), 1);
  report(a, first.leases(0), "sm_90a/Fake", 60.0);
  EXPECT_EQ(lease(a).leases_size(), 0) << "b is live: the confirmation is b's";
  now_ += kLiveMs + 1;  // b says nothing meanwhile
  const auto second = lease(a);
  ASSERT_EQ(second.leases_size(), 1) << "b went silent: a confirms its own measurement";
  EXPECT_TRUE(second.leases(0).confirmation());
  EXPECT_EQ(second.leases(0).candidate_id(), first.leases(0).candidate_id());
  EXPECT_EQ(lease(b).leases_size(), 0);
}

TEST_F(LeaseSchedulerTest, AHeartbeatRenewsOnlyTheLeasesItsWorkerHolds) {
  const std::string a = add_worker("sm_90a/Fake"), b = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  const v1::Lease held = lease(a).leases(0);
  now_ += 600;
  v1::HeartbeatRequest not_its_own;
  not_its_own.set_worker_id(b);
  not_its_own.add_lease_ids(held.lease_id());
  not_its_own.add_lease_ids("l-unknown");
  const auto answer = leases_.heartbeat(not_its_own);
  ASSERT_EQ(answer.expired_lease_ids_size(), 2);
  EXPECT_EQ(answer.expired_lease_ids(0), held.lease_id());
  EXPECT_EQ(store_.get_lease(held.lease_id())->deadline_ms, held.deadline_unix_ms()) << "b renewed a's lease";
  v1::HeartbeatRequest own;
  own.set_worker_id(a);
  own.add_lease_ids(held.lease_id());
  EXPECT_EQ(leases_.heartbeat(own).expired_lease_ids_size(), 0);
  EXPECT_EQ(store_.get_lease(held.lease_id())->deadline_ms, now_ + kTtlMs);
}

}  // namespace
}  // namespace evo
