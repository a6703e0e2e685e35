// Trust from identity, not from a report (issue 38): what a run and the result cache believe of a
// worker's measurements. The registered backend, not a report's flag, says estimated; a would-be
// elite is confirmed by another worker, a disagreement goes to a third, a worker its peers keep
// outvoting is quarantined; times below the device's floor are refused; the cache takes only what
// two workers agreed on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "device_floors.h"
#include "enrolments.h"
#include "errors.h"
#include "manager_fixture.h"
#include "run_views.h"
#include "server_config.h"

namespace evo {
namespace {

using Code = CoordinatorError::Code;
using test::ManagerTest;

constexpr const char* kClass = "sm_90a/Fake";

// What an honest worker measures for a genome (a stand-in for a GPU).
double honest_us(const std::string& genome) {
  return 50.0 + static_cast<double>(std::hash<std::string>{}(genome) % 1000) / 10.0;
}

class ResultAdmissionTest : public ManagerTest {
 protected:
  // Leases to the workers in turn and reports the time time_of gives each lease, until nothing is
  // left to lease. A worker refused PERMISSION_DENIED (quarantined) leaves the rotation.
  void drive(std::vector<std::string> workers, const std::function<double(const std::string&, const v1::Lease&)>& time_of,
             bool estimated = false) {
    for (int idle = 0; idle < 2;) {
      bool any = false;
      for (auto w = workers.begin(); w != workers.end();) {
        try {
          const v1::LeaseResponse granted = lease(*w, 2);
          for (const auto& l : granted.leases()) {
            any = true;
            report(*w, l, kClass, time_of(*w, l), estimated);
          }
          ++w;
        } catch (const CoordinatorError& e) {
          ASSERT_EQ(e.code(), Code::kPermissionDenied) << e.what();
          refused_.insert(*w);
          w = workers.erase(w);
        }
        now_ += 10;
      }
      idle = any ? 0 : idle + 1;
    }
  }

  v1::LeaderboardResponse board(const std::string& run_id) {
    v1::LeaderboardRequest req;
    req.set_run_id(run_id);
    return views_.leaderboard(req);
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

  int cache_rows() {
    const std::string dump = store_.dump();
    const size_t at = dump.find("FROM result_cache");
    const size_t end = dump.find("SELECT", at);
    const std::string rows = dump.substr(at, end == std::string::npos ? std::string::npos : end - at);
    return static_cast<int>(std::count(rows.begin(), rows.end(), '\n')) - 1;
  }

  RunViews views_{store_, workers_, clock()};
  std::set<std::string> refused_;
};

// Confirmation waits for the generation: while first measurements are outstanding no would-be
// elite is confirmed but the run's new bests (60, then 50, then 40), and then only those still in
// the top k, counting the confirmations under way (here 45 of the other three, which each beat
// the list when they arrived); the rest end on their one time, outside the elites.
TEST_F(ResultAdmissionTest, OnlyTheGenerationsTopKAreConfirmedOnceItsFirstMeasurementsAreIn) {
  const std::string w = add_worker(kClass), v = add_worker(kClass);
  const RunRecord run = submit(1, 6, 2, 11);
  const std::vector<double> times = {60, 50, 40, 45, 70, 55};
  std::map<std::string, double> first_us;  // candidate id -> its first time
  const auto half = lease(w, 3);
  ASSERT_EQ(half.leases_size(), 3);
  for (int i = 0; i < 3; ++i) {
    first_us[half.leases(i).candidate_id()] = times[i];
    report(w, half.leases(i), kClass, times[i]);
  }
  now_ += 1'000;  // w goes quiet: v, the one live worker, may take all the open work
  auto rest = lease(v, 6);
  ASSERT_EQ(rest.leases_size(), 6) << "the other three first measurements and the new bests' confirmations";
  std::vector<v1::Lease> confirmations;
  std::set<double> early;
  for (int i = 0, next = 3; i < rest.leases_size(); ++i) {
    if (rest.leases(i).confirmation()) {
      early.insert(first_us.at(rest.leases(i).candidate_id()));
      confirmations.push_back(rest.leases(i));
      continue;
    }
    first_us[rest.leases(i).candidate_id()] = times[next];
    report(v, rest.leases(i), kClass, times[next++]);
  }
  for (const auto& worker : {w, v}) {
    const auto granted = lease(worker, 6);
    confirmations.insert(confirmations.end(), granted.leases().begin(), granted.leases().end());
  }
  EXPECT_EQ(early, (std::set<double>{60, 50, 40})) << "only the new bests are confirmed early";
  std::set<double> confirmed;
  for (const auto& l : confirmations) {
    EXPECT_TRUE(l.confirmation());
    confirmed.insert(first_us.at(l.candidate_id()));
  }
  EXPECT_EQ(confirmed, (std::set<double>{60, 50, 40, 45}));
  in_transaction([&] {
    for (const auto& c : store_.candidates_of_run(run.id)) {
      if (confirmed.count(first_us.at(c.id))) continue;
      EXPECT_EQ(c.state, v1::CANDIDATE_STATE_DONE) << c.id;
      EXPECT_FALSE(c.elite_eligible) << c.id;
      EXPECT_EQ(c.fitness_us, first_us.at(c.id)) << c.id;
    }
    return 0;
  });
}

// A run cut short while its first generation is still being measured (a cancel, a budget, a
// suite's deadline) must not end without an elite: its first passing measurement is confirmed at
// once, before the generation is ranked. Without that, the cancel below leaves "no elites yet".
TEST_F(ResultAdmissionTest, ARunWithoutAnEliteConfirmsItsFirstPassingMeasurementAtOnce) {
  const std::string w = add_worker(kClass), v = add_worker(kClass);
  const RunRecord run = submit(1, 6, 2, 11);
  const auto first = lease(w, 1);
  ASSERT_EQ(first.leases_size(), 1);
  report(w, first.leases(0), kClass, 60);
  const auto next = lease(v, 1);
  ASSERT_EQ(next.leases_size(), 1);
  ASSERT_TRUE(next.leases(0).confirmation()) << "the run's first result waits for its generation's ranking";
  EXPECT_EQ(next.leases(0).candidate_id(), first.leases(0).candidate_id());
  report(v, next.leases(0), kClass, 60.3);
  runs_.cancel(run.id);
  const auto b = board(run.id);
  ASSERT_EQ(b.elites_size(), 1);
  EXPECT_EQ(b.elites(0).candidate_id(), first.leases(0).candidate_id());
}

// A run cut short mid-generation keeps the best it measured, not only its first: each new best is
// confirmed as it arrives. Without that, 50 and 40 would wait for a ranking the cancel never
// lets happen, and the run would end with 60.
TEST_F(ResultAdmissionTest, ARunCutShortKeepsTheBestItMeasuredAsItsElite) {
  const std::string w = add_worker(kClass), v = add_worker(kClass);
  const RunRecord run = submit(1, 6, 2, 11);
  const auto half = lease(w, 3);
  ASSERT_EQ(half.leases_size(), 3);
  const std::vector<double> times = {60, 50, 40};
  for (int i = 0; i < 3; ++i) report(w, half.leases(i), kClass, times[i]);
  const auto rest = lease(v, 6);
  for (const auto& l : rest.leases())
    if (l.confirmation()) report(v, l, kClass, 40.1);  // whichever it confirms, agreeing with 40 only
  runs_.cancel(run.id);
  const auto b = board(run.id);
  ASSERT_GE(b.elites_size(), 1);
  EXPECT_EQ(b.elites(0).candidate_id(), half.leases(2).candidate_id()) << "the 40 us candidate";
}

// Break 2: a worker that registered as measuring says estimated=true in its report, which once
// skipped the confirmation and made its invented time an elite of a measured run.
TEST_F(ResultAdmissionTest, AReportSayingEstimatedIsStillConfirmedOnAMeasuredRun) {
  const std::string w = add_worker(kClass);
  const RunRecord run = submit(1, 1, 1);
  const v1::Lease l = lease(w).leases(0);
  report(w, l, kClass, 60.0, /*estimated=*/true);
  const CandidateRecord c = *store_.get_candidate(l.candidate_id());
  EXPECT_EQ(c.state, v1::CANDIDATE_STATE_QUEUED) << "a would-be elite waits for its confirmation";
  EXPECT_TRUE(c.confirmation);
  EXPECT_EQ(board(run.id).elites_size(), 0);
  ASSERT_TRUE(c.first_evaluation_id);
  EXPECT_FALSE(store_.get_evaluation(*c.first_evaluation_id)->evaluation.estimated())
      << "estimated is what the worker registered, not what it reports";
  EXPECT_FALSE(views_.status(run.id).estimated());
}

TEST_F(ResultAdmissionTest, AModelWorkersResultIsEstimatedWhateverItsReportSays) {
  const std::string w = add_worker("sm_90a/model/estimated", true);
  submit(1, 2, 1);
  const v1::Lease l = lease(w).leases(0);
  report(w, l, "sm_90a/model/estimated", 60.0, /*estimated=*/false);
  const auto evaluations = store_.get_candidate(l.candidate_id());
  const int64_t id = evaluations->first_evaluation_id ? *evaluations->first_evaluation_id
                                                      : *evaluations->final_evaluation_id;
  EXPECT_TRUE(store_.get_evaluation(id)->evaluation.estimated());
}

// Break 3: the lie of a worker alone in its class (estimated=true, a time no kernel reaches) once
// entered the result cache as confirmed and answered another submitter's later run.
TEST_F(ResultAdmissionTest, ALoneWorkersLieNeverAnswersALaterRunThroughTheCache) {
  const std::string liar = add_worker(kClass);
  const RunRecord first = submit(1, 2, 2, 42);
  constexpr double kLie = 0.6;  // above the floor of any device: the confirmation's job, not the floor's
  drive({liar}, [](const std::string&, const v1::Lease&) { return kLie; }, /*estimated=*/true);
  const auto lied = board(first.id);
  ASSERT_GT(lied.elites_size(), 0);
  for (const auto& e : lied.elites()) EXPECT_TRUE(e.self_confirmed()) << "one worker's word, and labelled so";
  EXPECT_TRUE(views_.status(first.id).best_self_confirmed());
  EXPECT_EQ(cache_rows(), 0) << "a self-confirmed result stays out of the cache";

  now_ += kLiveMs + 1;  // the liar is gone; an honest worker submits the same problem
  const std::string honest = add_worker(kClass);
  const RunRecord again = submit(1, 2, 2, 42);
  drive({honest}, [](const std::string&, const v1::Lease& l) { return honest_us(l.genome()); });
  for (const auto& c : store_.candidates_of_run(again.id)) {
    EXPECT_EQ(c.result_source, v1::RESULT_SOURCE_MEASURED) << c.id;
    ASSERT_TRUE(c.fitness_us) << c.id;
    EXPECT_GT(*c.fitness_us, 10 * kLie) << c.id;
  }
}

// Break 3: 1e-9 µs and 5e-324 µs (a speedup of "infx") are no times: refused, nothing changes.
TEST_F(ResultAdmissionTest, TimesBelowTheDevicesFloorAreRefusedAndChangeNothing) {
  const std::string w = add_worker(kClass);
  submit(1, 1, 1);
  const v1::Lease l = lease(w).leases(0);
  const std::string before = store_.dump();
  for (double lie : {1e-9, 5e-324, 0.2}) {
    try {
      report(w, l, kClass, lie);
      ADD_FAILURE() << lie << " µs accepted";
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("below the physical floor"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(store_.dump(), before);
  EXPECT_TRUE(report(w, l, kClass, 60.0).accepted()) << "the same lease with a real time";
}

TEST_F(ResultAdmissionTest, TheFloorOfADeviceComesFromItsRowOfTheTable) {
  v1::DeviceInfo h100;
  h100.set_gpu_name("NVIDIA H100 80GB HBM3");
  EXPECT_STREQ(device_floor(h100).gpu, "H100");
  v1::DeviceInfo model;
  model.set_gpu_name("model:H200");
  EXPECT_STREQ(device_floor(model).gpu, "H200");
  v1::DeviceInfo unknown;
  unknown.set_gpu_name("Some Future GPU");
  EXPECT_STREQ(device_floor(unknown).gpu, "") << "the fastest card listed";
  // Each card's empty call is its own where it was measured; a card never measured gets less than
  // any measured one, never the H200's.
  EXPECT_DOUBLE_EQ(device_floor(h100).empty_call_us, 1.1);
  EXPECT_LT(device_floor(unknown).empty_call_us, device_floor(model).empty_call_us);
  EXPECT_LT(device_floor(unknown).empty_call_us, device_floor(h100).empty_call_us);
  RunRecord run;
  run.seed = "fa_s512_v3";  // its family reads the shapes
  run.shapes = {"2x16x4096x128"};
  v1::Evaluation e;
  e.set_status(v1::OK);
  // bench/NOTES.md: 2,16,4096,128 runs 537-608 µs on an H100; its compute floor at 779 TFLOP/s is 353 µs.
  e.set_fitness_us(537.0);
  EXPECT_EQ(implausible_time(e, run, h100), "");
  e.set_fitness_us(100.0);
  EXPECT_NE(implausible_time(e, run, h100).find("below the physical floor"), std::string::npos);
}

// A disagreement between the first two measurements goes to a third worker, never one of the
// two; the two that agree decide, and the one they outvoted is counted.
TEST_F(ResultAdmissionTest, ADisagreementGoesToAThirdWorker) {
  const std::string a = add_worker(kClass), b = add_worker(kClass), c = add_worker(kClass);
  const RunRecord run = submit(1, 1, 1);
  const v1::Lease first = lease(a).leases(0);
  report(a, first, kClass, 60.0);
  const v1::Lease second = lease(b).leases(0);
  ASSERT_TRUE(second.confirmation());
  report(b, second, kClass, 90.0);
  EXPECT_EQ(lease(a).leases_size(), 0) << "a measured it: c is live";
  EXPECT_EQ(lease(b).leases_size(), 0) << "b measured it: c is live";
  const auto third = lease(c);
  ASSERT_EQ(third.leases_size(), 1);
  EXPECT_EQ(third.leases(0).candidate_id(), first.candidate_id());
  report(c, third.leases(0), kClass, 61.0);
  const auto elites = board(run.id);
  ASSERT_EQ(elites.elites_size(), 1);
  EXPECT_DOUBLE_EQ(elites.elites(0).fitness_us(), 60.5) << "the mean of the two that agree";
  EXPECT_FALSE(elites.elites(0).self_confirmed());
  EXPECT_EQ(store_.get_worker(b)->disagreements, 1);
  EXPECT_EQ(store_.get_worker(a)->agreements, 1);
  EXPECT_EQ(store_.get_worker(c)->agreements, 1);
  EXPECT_EQ(cache_rows(), 1) << "two workers agreed: the cache keeps it";
}

// With no third worker live, a disagreement is settled out of the elites, at the slower time.
TEST_F(ResultAdmissionTest, ADisagreementNoThirdWorkerCanSettleStaysOutOfTheElites) {
  const std::string a = add_worker(kClass), b = add_worker(kClass);
  const RunRecord run = submit(1, 1, 1);
  const v1::Lease first = lease(a).leases(0);
  report(a, first, kClass, 30.0);
  report(b, lease(b).leases(0), kClass, 90.0);
  const CandidateRecord c = *store_.get_candidate(first.candidate_id());
  EXPECT_EQ(c.state, v1::CANDIDATE_STATE_DONE);
  EXPECT_FALSE(c.elite_eligible);
  EXPECT_EQ(c.fitness_us.value_or(0), 90.0);
  EXPECT_EQ(board(run.id).elites_size(), 0);
  EXPECT_EQ(store_.get_worker(a)->disagreements + store_.get_worker(b)->disagreements, 0) << "who lied is unknown";
  EXPECT_EQ(cache_rows(), 0);
}

// The rogue worker: it lies on every lease it gets (half the honest time), beside two honest
// workers. It cannot put its time into an elite or the cache, and is quarantined.
TEST_F(ResultAdmissionTest, ALiarIsOutvotedByItsPeersAndQuarantined) {
  const std::string a = add_worker(kClass), b = add_worker(kClass), liar = add_worker(kClass);
  const RunRecord run = submit(4, 8, 3, 11);
  drive({liar, a, b}, [&](const std::string& w, const v1::Lease& l) {
    const double us = honest_us(l.genome());
    return w == liar ? us / 2 : (w == a ? us : us * 1.01);
  });
  EXPECT_EQ(store_.get_run(run.id)->state, v1::DONE);
  const auto elites = board(run.id);
  ASSERT_EQ(elites.elites_size(), 3);
  for (const auto& e : elites.elites())
    EXPECT_NEAR(e.fitness_us(), honest_us(e.genome()) * 1.005, honest_us(e.genome()) * 0.006) << e.genome();
  const WorkerRecord rogue = *store_.get_worker(liar);
  EXPECT_FALSE(rogue.quarantined.empty());
  EXPECT_GE(rogue.disagreements, server::kQuarantineDisagreements);
  EXPECT_EQ(refused_, std::set<std::string>{liar});
  EXPECT_TRUE(store_.get_worker(a)->quarantined.empty());
  EXPECT_TRUE(store_.get_worker(b)->quarantined.empty());
  EXPECT_EQ(code_of([&] { lease(liar); }), Code::kPermissionDenied);
  const auto listed = workers_.list_workers(v1::ListWorkersRequest());
  int quarantined = 0;
  for (const auto& w : listed.workers()) {
    quarantined += !w.quarantined().empty();
    if (w.worker_id() == liar) {
      EXPECT_NE(w.quarantined().find("disagreed with its peers"), std::string::npos) << w.quarantined();
    }
  }
  EXPECT_EQ(quarantined, 1);
  // What the cache keeps is what the honest pair measured.
  for (const auto& c : store_.candidates_of_run(run.id)) {
    const auto hit = store_.cache_get(c.genome_hash, "1x8x512x64", kClass,
                                      cache_measurement_key(test::fake_device(kClass), *store_.get_run(run.id)));
    if (hit && hit->fitness_us) {
      EXPECT_GT(*hit->fitness_us, honest_us(c.genome) * 0.99) << c.id;
    }
  }
}

// Two identities colluding (issue 38, "also seen"): one holder of an enrolment key registers two
// workers that agree on the same lie. Unenrolled, each would confirm the other's time. As one
// party they confirm nothing of each other's: the honest parties measure again, outvote them, and
// the quarantine takes the enrolment whole, its next registration included.
TEST_F(ResultAdmissionTest, TwoIdentitiesOfOneEnrolmentCannotConfirmEachOthersLie) {
  const std::string key = enrol(store_, "mallory", now_);
  const std::string l1 = add_worker(kClass, false, key), l2 = add_worker(kClass, false, key);
  const std::string a = add_worker(kClass), b = add_worker(kClass);
  const RunRecord run = submit(4, 8, 3, 11);
  drive({l1, l2, a, b}, [&](const std::string& w, const v1::Lease& l) {
    const double us = honest_us(l.genome());
    return w == l1 || w == l2 ? us / 2 : (w == a ? us : us * 1.01);
  });
  EXPECT_EQ(store_.get_run(run.id)->state, v1::DONE);
  const auto elites = board(run.id);
  ASSERT_EQ(elites.elites_size(), 3);
  for (const auto& e : elites.elites()) {
    EXPECT_GT(e.fitness_us(), honest_us(e.genome()) * 0.99) << e.genome();
    EXPECT_FALSE(e.self_confirmed()) << e.genome();
  }
  EXPECT_FALSE(store_.get_worker(l1)->quarantined.empty());
  EXPECT_FALSE(store_.get_worker(l2)->quarantined.empty());
  EXPECT_TRUE(store_.get_worker(a)->quarantined.empty());
  EXPECT_TRUE(store_.get_worker(b)->quarantined.empty());
  EXPECT_FALSE(store_.get_enrolment("mallory")->refused.empty());
  EXPECT_EQ(code_of([&] { add_worker(kClass, false, key); }), Code::kPermissionDenied)
      << "the quarantined party cannot come back under a new identity";
  for (const auto& c : store_.candidates_of_run(run.id)) {
    const auto hit = store_.cache_get(c.genome_hash, "1x8x512x64", kClass,
                                      cache_measurement_key(test::fake_device(kClass), *store_.get_run(run.id)));
    if (hit && hit->fitness_us) {
      EXPECT_GT(*hit->fitness_us, honest_us(c.genome) * 0.99) << c.id;
    }
  }
}

// Alone in the class, an enrolment's two identities confirm each other only as the one party they
// are: self-confirmed, labelled so, kept out of the cache.
TEST_F(ResultAdmissionTest, AnEnrolmentAloneInItsClassIsSelfConfirmedWhicheverIdentityMeasures) {
  const std::string key = enrol(store_, "host-a", now_);
  const std::string a1 = add_worker(kClass, false, key), a2 = add_worker(kClass, false, key);
  const RunRecord run = submit(1, 1, 1);
  const v1::Lease first = lease(a1).leases(0);
  report(a1, first, kClass, 60.0);
  const v1::Lease second = lease(a2).leases(0);
  ASSERT_TRUE(second.confirmation());
  report(a2, second, kClass, 60.5);
  const auto elites = board(run.id);
  ASSERT_EQ(elites.elites_size(), 1);
  EXPECT_TRUE(elites.elites(0).self_confirmed());
  EXPECT_EQ(cache_rows(), 0);
  EXPECT_EQ(store_.get_worker(a1)->agreements + store_.get_worker(a2)->agreements, 0) << "no peer agreed";
}

}  // namespace
}  // namespace evo
