// evod killed while workers hold leases, and restarted after longer than the lease TTL: the
// leases in flight are not charged for evod's own downtime. Found by the fault campaign: without
// resume_leases_after_restart() the first sweep after a restart expired every lease at once, the
// workers' finished results were refused, and after kMaxLeaseAttempts evod restarts a healthy
// candidate was recorded as a CRASH.
#include <gtest/gtest.h>

#include <filesystem>

#include "evod_client.h"
#include "store_sqlite.h"

namespace evo::fault {
namespace {

namespace fs = std::filesystem;

TEST(EvodRestart, LeasesInFlightSurviveARestartLongerThanTheirTtl) {
  std::string tmpl = (fs::temp_directory_path() / "evo-restart-XXXXXX").string();
  std::string dir = mkdtemp(tmpl.data());
  std::string db = dir + "/evo.db";
  // The TTL leaves room for the client's reconnect backoff (about a second) after the restart.
  const std::vector<std::string> ttl = {"--lease-ttl-ms", "3000"};
  std::string worker, lease_id;
  int port = it::free_port();
  {
    Evod evod(db, dir + "/evod-1.log", ttl, port);
    v1::Run run;
    ASSERT_TRUE(evod.submit(2, "random", 3, &run).ok());
    worker = evod.register_worker();
    v1::LeaseResponse leases;
    ASSERT_TRUE(evod.lease(worker, 1, &leases).ok());
    ASSERT_EQ(leases.leases_size(), 1);
    lease_id = leases.leases(0).lease_id();
    evod.process().kill(SIGKILL);
    evod.process().wait();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(3300));  // down for longer than the TTL

  Evod evod(db, dir + "/evod-2.log", ttl, port);
  // The worker comes back later than one TTL after the restart, as gRPC's reconnect backoff
  // makes it (issue 38, break 4): within the restart's reconnect grace, its lease still holds.
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(evod.heartbeat(worker, lease_id, &beat).ok());
  EXPECT_EQ(beat.expired_lease_ids_size(), 0) << "the lease expired because evod itself was down";
  grpc::Status report = evod.report(worker, lease_id);
  EXPECT_TRUE(report.ok()) << report.error_message();
  EXPECT_NE(evod.process().log().find("event=leases_resumed active=1"), std::string::npos) << evod.process().log();
  {
    SqliteConnection c(db);
    auto s = c.prepare("SELECT COUNT(*) FROM leases WHERE outcome = 'expired'");
    ASSERT_TRUE(s.step());
    EXPECT_EQ(s.column_int(0), 0);
  }

  // A worker that died while evod was down still loses its lease, once the restart's reconnect
  // grace (server::kReconnectGraceMs, 20 s) and a TTL have passed: 40 s covers both.
  v1::LeaseResponse second;
  ASSERT_TRUE(evod.lease(worker, 1, &second).ok());
  ASSERT_EQ(second.leases_size(), 1);
  evod.process().kill(SIGKILL);
  evod.process().wait();
  Evod again(db, dir + "/evod-3.log", ttl, port);
  EXPECT_TRUE(it::eventually(40, [&] {
    SqliteConnection c(db);
    auto s = c.prepare("SELECT COUNT(*) FROM leases WHERE outcome = 'expired'");
    return s.step() && s.column_int(0) == 1;
  }));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace evo::fault
