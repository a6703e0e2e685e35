// The worker registry's own contract: the heartbeat interval, the liveness window and the counts
// built on it.
#include <gtest/gtest.h>

#include "enrolments.h"
#include "errors.h"
#include "manager_fixture.h"
#include "server_config.h"

namespace evo {
namespace {

using test::ManagerTest;

class WorkerRegistryTest : public ManagerTest {
 protected:
  int live_for(const RunRecord& run) {
    return in_transaction([&] { return workers_.live_workers_for(run, now_); });
  }
  bool another_live(const std::string& worker_id) {
    return in_transaction([&] {
      const WorkerRecord w = workers_.require(worker_id);
      return workers_.another_live_party(w.device.device_class(), {w.id}, now_);
    });
  }
  void touch(const std::string& worker_id) {
    store_.transaction([&] { workers_.touch(worker_id, now_); });
  }
};

TEST_F(WorkerRegistryTest, HeartbeatIntervalIsAThirdOfTheTtlAndNeverUnder50Ms) {
  v1::RegisterWorkerRequest req;
  *req.mutable_device() = test::fake_device("sm_90a/Fake");
  const auto registered = workers_.register_worker(req);
  EXPECT_EQ(registered.lease_ttl_ms(), kTtlMs);
  EXPECT_EQ(registered.heartbeat_interval_ms(), 300);
  EXPECT_EQ(WorkerRegistry(store_, 3000, clock()).heartbeat_interval_ms(), 1000);
  EXPECT_EQ(WorkerRegistry(store_, 120, clock()).heartbeat_interval_ms(), 50);
  EXPECT_THROW(WorkerRegistry(store_, 0, clock()), InputError);
}

TEST_F(WorkerRegistryTest, AWorkerIsLiveForThreeHeartbeatIntervalsAfterItWasLastHeard) {
  RunRecord any_class;  // a run whose first lease has not fixed its class yet
  const std::string w = add_worker("sm_90a/Fake");
  now_ += kLiveMs;
  EXPECT_EQ(live_for(any_class), 1) << "heard exactly three intervals ago";
  now_ += 1;
  EXPECT_EQ(live_for(any_class), 0) << "three intervals and a millisecond";
  touch(w);
  EXPECT_EQ(live_for(any_class), 1) << "heard from again";
  EXPECT_EQ(workers_.live_since(now_), now_ - kLiveMs);
}

TEST_F(WorkerRegistryTest, ARunCountsTheLiveWorkersOfItsClassOrAnyBeforeItHasOne) {
  add_worker("sm_90a/Fake");
  add_worker("sm_90a/Fake");
  add_worker("sm_90a/model/estimated", true);
  RunRecord run;
  EXPECT_EQ(live_for(run), 3);
  run.device_class = "sm_90a/Fake";
  EXPECT_EQ(live_for(run), 2);
  run.device_class = "sm_80/Other";
  EXPECT_EQ(live_for(run), 0);
}

TEST_F(WorkerRegistryTest, AnotherLiveWorkerIsOfTheSameClassNotItselfAndLive) {
  const std::string a = add_worker("sm_90a/Fake");
  EXPECT_FALSE(another_live(a)) << "alone";
  add_worker("sm_90a/model/estimated", true);
  EXPECT_FALSE(another_live(a)) << "a worker of another class cannot confirm its measurement";
  const std::string b = add_worker("sm_90a/Fake");
  EXPECT_TRUE(another_live(a));
  EXPECT_TRUE(another_live(b));
  now_ += kLiveMs + 1;
  touch(a);
  EXPECT_FALSE(another_live(a)) << "b went silent";
}

TEST_F(WorkerRegistryTest, AnUnknownWorkerIsToldToRegister) {
  try {
    in_transaction([&] { return workers_.require("w-0000000000000000"); });
    ADD_FAILURE() << "no CoordinatorError";
  } catch (const CoordinatorError& e) {
    EXPECT_EQ(e.code(), CoordinatorError::Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("register first"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(in_transaction([&] { return workers_.find("w-0000000000000000"); }).has_value());
}

// A registration's backend and device class must tell the same story: a "cuda" worker measures, a
// "model" one estimates, and its class says so; evod takes estimated from this, never from a report.
TEST_F(WorkerRegistryTest, ABackendThatDoesNotFitItsClassIsRefused) {
  const std::string before = store_.dump();
  auto refusal = [&](const std::string& backend, const std::string& device_class) -> std::string {
    v1::RegisterWorkerRequest req;
    *req.mutable_device() = test::fake_device(device_class);
    req.mutable_device()->set_backend(backend);
    try {
      workers_.register_worker(req);
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), CoordinatorError::Code::kInvalidArgument) << e.what();
      return e.what();
    }
    ADD_FAILURE() << backend << " " << device_class << " registered";
    return "";
  };
  EXPECT_EQ(refusal("model", "sm_90a/Fake"),
            "register: backend 'model' needs a device class ending in /estimated, not 'sm_90a/Fake'");
  EXPECT_EQ(refusal("cuda", "sm_90a/model/estimated"),
            "register: backend 'cuda' measures; its device class 'sm_90a/model/estimated' may not end in /estimated");
  EXPECT_EQ(refusal("", "sm_90a/Fake"), "register: backend '' is neither 'cuda' nor 'model'");
  EXPECT_EQ(store_.dump(), before);
}

// Each registration gets its own credential, kept only as a hash; a call that names the worker
// without it, or with another worker's, is refused.
TEST_F(WorkerRegistryTest, AWorkerIsAuthenticatedByTheCredentialItsRegistrationGot) {
  v1::RegisterWorkerRequest req;
  *req.mutable_device() = test::fake_device("sm_90a/Fake");
  const auto a = workers_.register_worker(req), b = workers_.register_worker(req);
  ASSERT_EQ(a.credential().size(), 64u) << "256 random bits in hex";
  EXPECT_NE(a.credential(), b.credential());
  EXPECT_EQ(store_.dump().find(a.credential()), std::string::npos) << "the store keeps a hash, not the secret";
  EXPECT_EQ(in_transaction([&] { return workers_.authenticate(a.worker_id(), a.credential()); }).id, a.worker_id());
  for (const std::string& wrong : {std::string(), b.credential(), a.credential() + "0"}) {
    try {
      in_transaction([&] { return workers_.authenticate(a.worker_id(), wrong); });
      ADD_FAILURE() << "'" << wrong << "' accepted";
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), CoordinatorError::Code::kPermissionDenied);
      EXPECT_NE(std::string(e.what()).find("a worker acts only as itself"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(a.credential()), std::string::npos);
    }
  }
}

// Enrolments (issue 38's colluding identities): the workers registered under one key are one
// party. None stands for "another worker" to another, so a holder of one key cannot confirm its
// own measurements through a second identity.
TEST_F(WorkerRegistryTest, TheWorkersOfOneEnrolmentAreOnePartyNotEachOthersPeers) {
  const std::string key = enrol(store_, "host-a", now_);
  const std::string a1 = add_worker("sm_90a/Fake", false, key), a2 = add_worker("sm_90a/Fake", false, key);
  EXPECT_EQ(store_.get_worker(a1)->enrolment, "host-a");
  EXPECT_FALSE(another_live(a1)) << "a2 is the same party";
  EXPECT_TRUE(in_transaction([&] { return workers_.same_party(a1, a2); }));
  const std::string b = add_worker("sm_90a/Fake");
  EXPECT_TRUE(another_live(a1)) << "b is another party";
  EXPECT_TRUE(another_live(a2));
  EXPECT_TRUE(another_live(b));
  EXPECT_FALSE(in_transaction([&] { return workers_.same_party(a1, b); }));
  const auto listed = workers_.list_workers(v1::ListWorkersRequest());
  int enrolled = 0;
  for (const auto& w : listed.workers()) enrolled += w.enrolment() == "host-a";
  EXPECT_EQ(enrolled, 2);
}

CoordinatorError::Code refusal_code(WorkerRegistry& registry, const std::string& key, std::string* why) {
  v1::RegisterWorkerRequest req;
  *req.mutable_device() = test::fake_device("sm_90a/Fake");
  req.set_enrolment_key(key);
  try {
    registry.register_worker(req);
  } catch (const CoordinatorError& e) {
    *why = e.what();
    return e.code();
  }
  *why = "registered";
  return CoordinatorError::Code::kInvalidArgument;
}

// A key evod does not know, a revoked enrolment's, and (with enrolled_only) none at all are
// refused in one line each, and store nothing.
TEST_F(WorkerRegistryTest, ARegistrationWithoutAnAdmittedKeyIsRefusedAndStoresNothing) {
  const std::string key = enrol(store_, "host-a", now_);
  const std::string before = store_.dump();
  std::string why;
  EXPECT_EQ(refusal_code(workers_, key + "0", &why), CoordinatorError::Code::kPermissionDenied);
  EXPECT_NE(why.find("the enrolment key is not one evod knows"), std::string::npos) << why;
  WorkerRegistry enrolled_only(store_, kTtlMs, clock(), /*enrolled_only=*/true);
  EXPECT_EQ(refusal_code(enrolled_only, "", &why), CoordinatorError::Code::kPermissionDenied);
  EXPECT_NE(why.find("takes only enrolled workers (--enrolled-workers-only)"), std::string::npos) << why;
  EXPECT_EQ(store_.dump(), before);
  revoke_enrolment(store_, "host-a", "revoked by the operator");
  const std::string revoked = store_.dump();
  EXPECT_EQ(refusal_code(enrolled_only, key, &why), CoordinatorError::Code::kPermissionDenied);
  EXPECT_NE(why.find("enrolment 'host-a' is refused: revoked by the operator"), std::string::npos) << why;
  EXPECT_NE(why.find("evod enrol --release host-a"), std::string::npos) << why;
  EXPECT_EQ(store_.dump(), revoked);
  release_enrolment(store_, "host-a");
  EXPECT_EQ(refusal_code(enrolled_only, key, &why), CoordinatorError::Code::kInvalidArgument) << why;
  EXPECT_EQ(why, "registered");
}

// A quarantine holds for the enrolment: its other identities stop, and a new registration under
// its key is refused (an unenrolled worker could register afresh) until the operator releases it.
TEST_F(WorkerRegistryTest, AQuarantineRefusesTheWholeEnrolmentAndItsNextRegistrations) {
  const std::string key = enrol(store_, "host-a", now_);
  const std::string a1 = add_worker("sm_90a/Fake", false, key), a2 = add_worker("sm_90a/Fake", false, key);
  const std::string b = add_worker("sm_90a/Fake");
  std::vector<std::string> quarantined;
  store_.transaction([&] {
    for (int i = 0; i < server::kQuarantineDisagreements; ++i) quarantined = workers_.count_verdict(a1, false, "lied");
  });
  EXPECT_EQ(quarantined, (std::vector<std::string>{a1, a2}));
  EXPECT_FALSE(store_.get_worker(a2)->quarantined.empty());
  EXPECT_TRUE(store_.get_worker(b)->quarantined.empty());
  for (const auto& w : {a1, a2}) {
    try {
      in_transaction([&] { return workers_.authenticate(w, credentials_[w]); });
      ADD_FAILURE() << w << " still acts";
    } catch (const CoordinatorError& e) {
      EXPECT_EQ(e.code(), CoordinatorError::Code::kPermissionDenied);
      EXPECT_NE(std::string(e.what()).find("quarantined"), std::string::npos) << e.what();
    }
  }
  std::string why;
  EXPECT_EQ(refusal_code(workers_, key, &why), CoordinatorError::Code::kPermissionDenied);
  EXPECT_NE(why.find("enrolment 'host-a' is refused: worker " + a1 + " was quarantined"), std::string::npos) << why;
  release_enrolment(store_, "host-a");
  EXPECT_EQ(in_transaction([&] { return workers_.authenticate(a2, credentials_[a2]); }).id, a2);
  EXPECT_EQ(refusal_code(workers_, key, &why), CoordinatorError::Code::kInvalidArgument) << why;
}

TEST_F(WorkerRegistryTest, EnrolmentNamesAreCheckedAndAnUnknownOneIsNamed) {
  EXPECT_EQ(bad_enrolment_name("gpu-host_1:a.b"), "");
  EXPECT_NE(bad_enrolment_name(""), "");
  EXPECT_NE(bad_enrolment_name(std::string(65, 'a')), "");
  EXPECT_NE(bad_enrolment_name("a b"), "");
  EXPECT_NE(bad_enrolment_name("-x"), "");
  EXPECT_THROW(enrol(store_, "a/b", now_), InputError);
  const std::string before = store_.dump();
  try {
    revoke_enrolment(store_, "nobody", "x");
    ADD_FAILURE() << "revoked an enrolment that does not exist";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "there is no enrolment 'nobody' (evod enrol --list shows them)");
  }
  EXPECT_EQ(store_.dump(), before);
  const std::string first = enrol(store_, "host-a", now_), second = enrol(store_, "host-a", now_ + 1);
  EXPECT_NE(first, second);
  EXPECT_EQ(store_.dump().find(second), std::string::npos) << "the store keeps a hash of the key";
  std::string why;
  EXPECT_EQ(refusal_code(workers_, first, &why), CoordinatorError::Code::kPermissionDenied) << "a new key replaces it";
  ASSERT_EQ(enrolment_lines(store_).size(), 1u);
  EXPECT_EQ(enrolment_lines(store_)[0].rfind("host-a  key made ", 0), 0u) << enrolment_lines(store_)[0];
}

}  // namespace
}  // namespace evo
