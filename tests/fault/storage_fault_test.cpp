// Storage faults under a real evod: the database size cap (SQLite's own "database or disk is full"),
// a full file system (a tiny tmpfs, where mounting is allowed), a read-only database file, the
// database directory or its WAL or -shm file removed under a running evod. Each time evod answers
// with a status that names the storage problem, logs it once, stays up, and what was stored before
// is unchanged. And at start: a corrupt file, or one truncated to 0 bytes, is refused in one line.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "evod_client.h"
#include "process_harness.h"
#include "test_db.h"
#include "store.h"

namespace evo::fault {
namespace {

namespace fs = std::filesystem;
using it::Process;

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "evo-fault-XXXXXX").string();
  return mkdtemp(tmpl.data());
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Something worth losing: a run, a worker, one reported result and one lease still out.
struct Stored {
  std::string run_id, worker, open_lease;
};
Stored store_some_work(Evod& evod) {
  Stored s;
  v1::Run run;
  EXPECT_TRUE(evod.submit(4, "random", 7, &run).ok());
  s.run_id = run.run_id();
  s.worker = evod.register_worker();
  v1::LeaseResponse leases;
  EXPECT_TRUE(evod.lease(s.worker, 2, &leases).ok());
  EXPECT_EQ(leases.leases_size(), 2);
  if (leases.leases_size() == 2) {
    EXPECT_TRUE(evod.report(s.worker, leases.leases(0).lease_id()).ok());
    s.open_lease = leases.leases(1).lease_id();
  }
  return s;
}

// Submits ever larger runs until one is refused as full; returns that status (or the last OK).
grpc::Status fill_until_refused(Evod& evod, const std::string& db, std::string* dump_before_refusal) {
  grpc::Status s;
  for (uint64_t seed = 1000; seed < 1040; ++seed) {
    *dump_before_refusal = Store(db).dump();
    s = evod.submit(4096, "random", seed);
    if (!s.ok()) return s;
  }
  return s;
}

// The open lease must outlive the test: its expiry is a write of its own, which would fail and
// be logged a second time (filling the database takes 14 s alone, over 30 under a loaded CI).
const std::vector<std::string> kLongLease = {"--lease-ttl-ms", "600000"};

void expect_full_disk_handled(Evod& evod, const std::string& db, const std::string& log_path) {
  Stored stored = store_some_work(evod);
  std::string before;
  grpc::Status s = fill_until_refused(evod, db, &before);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("storage full"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("full"), std::string::npos) << s.error_message();
  EXPECT_EQ(Store(db).dump(), before) << "the refused submission changed the database";

  // Writes keep failing the same way, reads keep working, evod stays up and logs the fault once.
  EXPECT_EQ(evod.submit(4096, "random", 2000).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(evod.submit(4096, "random", 2001).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(evod.get_run(stored.run_id).ok());
  EXPECT_TRUE(evod.process().running());
  EXPECT_EQ(Store(db).dump(), before);
  std::string log = file_bytes(log_path);
  EXPECT_EQ(count_of(log, "event=storage_failed"), 1u) << log;
  EXPECT_EQ(count_of(log, "fault=full"), 1u) << log;
}

TEST(StorageFault, DatabaseSizeCapIsRefusedAsFullAndKeepsWhatIsStored) {
  std::string dir = temp_dir();
  std::vector<std::string> flags = kLongLease;
  flags.insert(flags.end(), {"--max-db-mb", "1"});
  Evod evod(dir + "/evo.db", dir + "/evod.log", flags);
  expect_full_disk_handled(evod, dir + "/evo.db", dir + "/evod.log");
  fs::remove_all(dir);
}

TEST(StorageFault, FullFileSystemIsResourceExhaustedAndKeepsWhatIsStored) {
  std::string dir = temp_dir();
  std::string data = dir + "/tiny";
  fs::create_directory(data);
  if (mount("tmpfs", data.c_str(), "tmpfs", 0, "size=384k") != 0) {
    std::string why = std::strerror(errno);
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << why << "); the size-cap test covers SQLITE_FULL";
  }
  {
    Evod evod(data + "/evo.db", dir + "/evod.log", kLongLease);
    expect_full_disk_handled(evod, data + "/evo.db", dir + "/evod.log");
    evod.process().kill(SIGKILL);
    evod.process().wait();
  }
  umount2(data.c_str(), MNT_DETACH);
  fs::remove_all(dir);
}

// Makes dir read-only for evod: permissions for an ordinary user; for root (whom permissions do
// not stop) a read-only bind mount. Returns false where neither works.
bool make_read_only(const std::string& dir, const std::string& db, bool* mounted) {
  *mounted = false;
  if (geteuid() != 0) {
    return chmod(db.c_str(), 0444) == 0 && chmod(dir.c_str(), 0555) == 0;
  }
  if (mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) return false;
  if (mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    umount2(dir.c_str(), MNT_DETACH);
    return false;
  }
  *mounted = true;
  return true;
}

TEST(StorageFault, ReadOnlyDatabaseIsOneClearLineAndStaysUntouched) {
  std::string root = temp_dir();
  std::string dir = root + "/data", db = dir + "/evo.db";
  fs::create_directory(dir);
  {
    Evod evod(db, root + "/first.log");
    store_some_work(evod);
    evod.process().kill(SIGTERM);
    ASSERT_EQ(evod.process().wait(), 0);
  }
  std::string before = file_bytes(db);
  ASSERT_FALSE(before.empty());
  bool mounted = false;
  if (!make_read_only(dir, db, &mounted)) {
    fs::remove_all(root);
    GTEST_SKIP() << "cannot make the database read-only here";
  }
  Process evod({EVOD_BIN, "serve", "--db", db, "--listen", "127.0.0.1:" + std::to_string(it::free_port())},
               root + "/evod.log");
  EXPECT_EQ(evod.wait(), 1);
  std::string log = evod.log();
  EXPECT_NE(log.find("is read-only"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_EQ(file_bytes(db), before);
  if (mounted) umount2(dir.c_str(), MNT_DETACH);
  chmod(dir.c_str(), 0755);
  fs::remove_all(root);
}

TEST(StorageFault, DatabaseDirectoryRemovedUnderRunningEvodIsUnavailableNotAGhostWrite) {
  std::string root = temp_dir();
  std::string dir = root + "/data", db = dir + "/evo.db";
  fs::create_directory(dir);
  Evod evod(db, root + "/evod.log");
  Stored stored = store_some_work(evod);
  std::string before = Store(db).dump();

  // Moved away first (so that what evod holds can still be read and compared), then deleted.
  fs::rename(dir, root + "/moved");
  grpc::Status s = evod.report(stored.worker, stored.open_lease);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("was removed or replaced"), std::string::npos) << s.error_message();
  EXPECT_EQ(evod.submit(4, "random", 9).error_code(), grpc::StatusCode::UNAVAILABLE);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a few lease sweeps meanwhile
  EXPECT_EQ(Store(root + "/moved/evo.db").dump(), before) << "evod kept writing into the moved file";

  fs::remove_all(root + "/moved");
  EXPECT_EQ(evod.report(stored.worker, stored.open_lease).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(evod.process().running());
  std::string log = evod.process().log();
  EXPECT_EQ(count_of(log, "event=storage_failed"), 1u) << log;
  EXPECT_NE(log.find("fault=unavailable"), std::string::npos) << log;
  fs::remove_all(root);
}

// Removing the WAL under a running evod used to lose every result it acknowledged afterwards (and
// those before, not yet checkpointed) at the next SIGKILL, without a word. Now the next write is
// refused UNAVAILABLE with one log line, and after a SIGKILL the restarted evod has everything that
// was acknowledged.
void expect_journal_removal_refused(const char* suffix, const char* what) {
  std::string root = temp_dir();
  std::string db = root + "/evo.db";
  std::string before;
  Stored stored;
  {
    Evod evod(db, root + "/evod.log");
    stored = store_some_work(evod);
    ASSERT_TRUE(fs::remove(db + suffix));
    grpc::Status s = evod.report(stored.worker, stored.open_lease);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_NE(s.error_message().find(std::string(what) + " '" + db + suffix + "' was removed or replaced"),
              std::string::npos)
        << s.error_message();
    EXPECT_EQ(evod.submit(4, "random", 9).error_code(), grpc::StatusCode::UNAVAILABLE);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a few lease sweeps meanwhile
    EXPECT_TRUE(evod.process().running());
    std::string log = evod.process().log();
    EXPECT_EQ(count_of(log, "event=storage_failed"), 1u) << log;
    EXPECT_NE(log.find("every write is refused until evod restarts"), std::string::npos) << log;
    evod.process().kill(SIGKILL);
    evod.process().wait();
  }
  Evod restarted(db, root + "/evod2.log");
  EXPECT_TRUE(restarted.get_run(stored.run_id).ok()) << "the acknowledged run was lost";
  v1::HeartbeatResponse hb;
  EXPECT_TRUE(restarted.heartbeat(stored.worker, stored.open_lease, &hb).ok());
  grpc::Status again = restarted.report(stored.worker, stored.open_lease);
  EXPECT_TRUE(again.ok()) << "the refused report can be made again: " << again.error_message();
  fs::remove_all(root);
}

TEST(StorageFault, WalRemovedUnderRunningEvodIsUnavailableAndLosesNothingAcknowledged) {
  expect_journal_removal_refused("-wal", "WAL file");
}

TEST(StorageFault, SharedMemoryFileRemovedUnderRunningEvodIsUnavailable) {
  expect_journal_removal_refused("-shm", "shared-memory file");
}

// evod as a process that must refuse to start: its exit status and its whole output.
int refused_start(const std::string& db, const std::string& log, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{EVOD_BIN, "serve", "--db", db, "--listen",
                                "127.0.0.1:" + std::to_string(it::free_port())};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Process evod(argv, log);
  return evod.wait();
}

TEST(StorageFault, CorruptDatabaseIsRefusedAtStartInOneLineAndLeftAsItWas) {
  std::string root = temp_dir();
  std::string db = root + "/evo.db";
  {
    Evod evod(db, root + "/first.log");
    store_some_work(evod);
    evod.process().kill(SIGTERM);
    ASSERT_EQ(evod.process().wait(), 0);
  }
  // The runs table: a start without quick_check would read past it (only the schema and the
  // liveness clock are read at start) and write into the damaged file.
  test::damage_table(db, "runs");
  const std::string before = file_bytes(db);
  EXPECT_EQ(refused_start(db, root + "/evod.log"), 1);
  const std::string log = file_bytes(root + "/evod.log");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find("is corrupt (PRAGMA quick_check: "), std::string::npos) << log;
  EXPECT_EQ(file_bytes(db), before) << "evod wrote into the file it refused";
  fs::remove_all(root);
}

TEST(StorageFault, EmptyDatabaseFileIsRefusedUnlessInit) {
  std::string root = temp_dir();
  std::string db = root + "/evo.db";
  std::ofstream(db).close();
  EXPECT_EQ(refused_start(db, root + "/evod.log"), 1);
  const std::string log = file_bytes(root + "/evod.log");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find("is an empty file (0 bytes)"), std::string::npos) << log;
  EXPECT_NE(log.find("--init"), std::string::npos) << log;
  EXPECT_EQ(fs::file_size(db), 0u);

  Evod evod(db, root + "/init.log", {"--init"});
  v1::Run run;
  EXPECT_TRUE(evod.submit(4, "random", 7, &run).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace evo::fault
