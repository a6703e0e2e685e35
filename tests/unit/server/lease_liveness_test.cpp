// Leases are charged only for what the worker could do: not for time evod was stopped, stalled or
// down (its sweeper's liveness ticks), and not for a grant that never reached the worker (a caller
// that gave up, or a lease its worker's next request does not name). The clock is the test's; the
// sweeper's ticks are calls of sweep_expired_leases().
#include <gtest/gtest.h>

#include "manager_fixture.h"
#include "server_config.h"

namespace evo {
namespace {

using test::ManagerTest;

class LeaseLivenessTest : public ManagerTest {
 protected:
  // evod live for ms: the sweeper ticks every period, as evod's does.
  void live_for(int64_t ms) {
    const int period = leases_.sweep_period_ms();
    for (int64_t t = 0; t < ms; t += period) {
      now_ += std::min<int64_t>(period, ms - t);
      leases_.sweep_expired_leases();
    }
  }
  v1::HeartbeatResponse heartbeat(const std::string& worker, const v1::Lease& l) {
    v1::HeartbeatRequest hb;
    hb.set_worker_id(worker);
    hb.set_credential(credentials_[worker]);
    hb.add_lease_ids(l.lease_id());
    return leases_.heartbeat(hb);
  }
  // A lease request that names what its worker holds.
  v1::LeaseResponse lease_holding(const std::string& worker, const std::vector<std::string>& held, int n = 1) {
    v1::LeaseRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials_[worker]);
    req.set_max_candidates(n);
    req.set_names_held_leases(true);
    for (const auto& id : held) req.add_held_lease_ids(id);
    return leases_.lease(req);
  }
};

// Break 4: a 20 s SIGSTOP of evod expired every lease of workers that kept heartbeating.
TEST_F(LeaseLivenessTest, AStallOfEvodDoesNotExpireTheLeasesOfAWorkerThatKeepsHeartbeating) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  const auto granted = lease(w, 2);
  ASSERT_EQ(granted.leases_size(), 2);
  live_for(600);
  for (const auto& l : granted.leases()) ASSERT_EQ(heartbeat(w, l).expired_lease_ids_size(), 0);
  now_ += 20'000;  // SIGSTOP: no tick, no heartbeat reaches evod
  EXPECT_EQ(leases_.sweep_expired_leases(), 0) << "the stall is not charged to the leases";
  // The worker's heartbeats, queued meanwhile, are served within a TTL of evod's return.
  live_for(kTtlMs / 2);
  for (const auto& l : granted.leases()) EXPECT_EQ(heartbeat(w, l).expired_lease_ids_size(), 0) << l.lease_id();
  for (const auto& l : granted.leases())
    EXPECT_TRUE(report(w, l, "sm_90a/Fake", 80.0).accepted()) << l.lease_id();
}

// Break 4: after a 7-minute outage the worker's finished results were refused (one TTL of grace).
TEST_F(LeaseLivenessTest, AfterALongOutageAWorkerThatReturnsWithinTheGraceHasItsResultsAccepted) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  const auto granted = lease(w, 2);
  ASSERT_EQ(granted.leases_size(), 2);
  live_for(300);
  now_ += 7 * 60'000;  // evod down for 7 minutes; a new process starts on the same database
  WorkerRegistry workers(store_, kTtlMs, clock());
  RunLifecycle runs(store_, clock());
  LeaseScheduler restarted(store_, workers, runs, kTtlMs, clock());
  EXPECT_EQ(restarted.resume_leases_after_restart(), 2);
  // The worker reaches evod again within its reconnect backoff, well inside the grace.
  const int64_t back_after = server::kReconnectGraceMs - 5'000;
  for (int64_t t = 0; t < back_after; t += restarted.sweep_period_ms()) {
    now_ += restarted.sweep_period_ms();
    EXPECT_EQ(restarted.sweep_expired_leases(), 0) << "at " << t << " ms after the restart";
  }
  for (const auto& l : granted.leases()) {
    v1::ReportRequest req;
    req.set_worker_id(w);
    req.set_credential(credentials_[w]);
    req.set_lease_id(l.lease_id());
    req.mutable_evaluation()->set_status(v1::OK);
    req.mutable_evaluation()->set_fitness_us(70.0);
    *req.mutable_evaluation()->mutable_device() = test::fake_device("sm_90a/Fake");
    EXPECT_TRUE(restarted.report(req).accepted()) << l.lease_id();
  }
}

// Liveness does not keep a dead worker's lease forever: once evod is live again, the lease runs
// out what it had left plus one TTL, and its candidate goes back to the queue.
TEST_F(LeaseLivenessTest, TheLeaseOfAWorkerThatNeverReturnsExpiresAfterTheGapAndTheGrace) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  const auto l = lease(w).leases(0);
  live_for(300);
  now_ += 20'000;
  EXPECT_EQ(leases_.sweep_expired_leases(), 0);
  live_for(2 * kTtlMs + 1'000);
  EXPECT_EQ(store_.get_lease(l.lease_id())->outcome, LeaseOutcome::kExpired);
  EXPECT_EQ(store_.get_candidate(l.candidate_id())->attempts, 1);
}

// Break 6: a LeaseCandidates call whose client had given up still committed leases.
TEST_F(LeaseLivenessTest, ALeaseRequestWhoseCallerGaveUpGrantsNothing) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  v1::LeaseRequest req;
  req.set_worker_id(w);
  req.set_credential(credentials_[w]);
  req.set_max_candidates(2);
  EXPECT_THROW(leases_.lease(req, [] { return false; }), CallerGone);
  // Rolled back whole: no lease, every candidate queued and uncharged.
  for (const auto& c : store_.candidates_of_run("run-0001")) {
    EXPECT_EQ(c.state, v1::CANDIDATE_STATE_QUEUED) << c.id;
    EXPECT_EQ(c.attempts, 0) << c.id;
  }
  EXPECT_EQ(store_.active_lease_counts().count(w), 0u);
  EXPECT_EQ(leases_.lease(req, [] { return true; }).leases_size(), 2) << "a caller that waits gets them";
}

// Break 6: a grant whose answer was lost blocked its candidate a full TTL and counted toward the
// kMaxLeaseAttempts after which the candidate is recorded as a CRASH.
TEST_F(LeaseLivenessTest, LeasesTheWorkerNeverReceivedAreReturnedAtOnceAndNotCharged) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 1, 1);
  std::string lost;
  for (int i = 0; i < server::kMaxLeaseAttempts + 2; ++i) {
    // The previous answer never arrived: the worker holds nothing, and says so.
    const auto granted = lease_holding(w, {});
    ASSERT_EQ(granted.leases_size(), 1) << "try " << i << ": the unreceived lease came back at once";
    if (!lost.empty()) {
      EXPECT_EQ(store_.get_lease(lost)->outcome, LeaseOutcome::kReturned);
      EXPECT_EQ(granted.leases(0).candidate_id(), store_.get_lease(lost)->candidate_id);
    }
    lost = granted.leases(0).lease_id();
    now_ += 10;
  }
  const auto c = store_.get_candidate(store_.get_lease(lost)->candidate_id);
  EXPECT_EQ(c->attempts, 0) << "no try counted";
  EXPECT_EQ(c->state, v1::CANDIDATE_STATE_LEASED);
  // A lease the worker names is kept.
  const auto again = lease_holding(w, {lost});
  EXPECT_EQ(again.leases_size(), 0);
  EXPECT_EQ(store_.get_lease(lost)->outcome, LeaseOutcome::kActive);
  v1::Lease held;
  held.set_lease_id(lost);
  EXPECT_TRUE(report(w, held, "sm_90a/Fake", 70.0).accepted());
}

// A worker from before the acknowledgement (it names nothing) keeps its leases.
TEST_F(LeaseLivenessTest, ARequestThatDoesNotNameItsLeasesReturnsNone) {
  const std::string w = add_worker("sm_90a/Fake");
  submit(1, 2, 1);
  const auto first = lease(w);
  ASSERT_EQ(first.leases_size(), 1);
  ASSERT_EQ(lease(w).leases_size(), 1);
  EXPECT_EQ(store_.get_lease(first.leases(0).lease_id())->outcome, LeaseOutcome::kActive);
}

}  // namespace
}  // namespace evo
