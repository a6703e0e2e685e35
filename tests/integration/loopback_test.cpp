// evod + evo-worker binaries on loopback with the model evaluator (no GPU): whole runs, crashes of
// either side, and bad input at the gRPC edge.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "process_harness.h"
#include "store.h"
#include "store_sqlite.h"
#include "template_registry.h"

namespace evo::it {
namespace {

// Read-only queries against the database evod is using (WAL lets readers in while it writes).
class DbReader {
 public:
  explicit DbReader(const std::string& path) : db_(path) { db_.exec("PRAGMA busy_timeout = 5000"); }
  int64_t count(const char* sql, const std::string& arg = "") {
    auto s = db_.prepare(sql);
    if (!arg.empty()) s.bind(1, arg);
    return s.step() ? s.column_int(0) : 0;
  }
  std::vector<std::string> column(const char* sql, const std::string& arg) {
    auto s = db_.prepare(sql);
    s.bind(1, arg);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.column_blob(0));
    return out;
  }

 private:
  SqliteConnection db_;
};

std::vector<std::string> genomes_of(const std::string& db, const std::string& run_id) {
  return DbReader(db).column("SELECT genome FROM candidates WHERE run_id = ? ORDER BY seq", run_id);
}

// Every candidate of the run is done, and none was evaluated twice outside a confirmation.
void expect_each_candidate_counted_once(const std::string& db, const std::string& run_id) {
  DbReader r(db);
  EXPECT_EQ(r.count("SELECT COUNT(*) FROM candidates WHERE run_id = ? AND state != 'done'", run_id), 0);
  EXPECT_EQ(r.count("SELECT COUNT(*) FROM (SELECT c.id FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
                    "WHERE c.run_id = ? AND e.is_confirmation = 0 GROUP BY c.id HAVING COUNT(*) != 1)",
                    run_id),
            0);
  EXPECT_EQ(r.count("SELECT COUNT(*) FROM candidates WHERE run_id = ?", run_id),
            r.count("SELECT COUNT(DISTINCT e.candidate_id) FROM evaluations e JOIN candidates c ON c.id = "
                    "e.candidate_id WHERE c.run_id = ?",
                    run_id));
}

// Every line a worker writes about a candidate's genome or its kernel names the run and the
// candidate, so that one grep follows a candidate through the logs. Returns how many such lines.
int expect_candidate_lines_name_their_ids(const std::string& log) {
  int lines = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("genome_hash=") == std::string::npos && line.find("event=compiled ") == std::string::npos)
      continue;
    ++lines;
    EXPECT_NE(line.find(" run_id=run-"), std::string::npos) << line;
    EXPECT_NE(line.find(" candidate_id=run-"), std::string::npos) << line;
  }
  return lines;
}

TEST(Loopback, ThreeWorkersFinishFourGenerationsOfTwelve) {
  Cluster c;
  c.start_evod();
  std::vector<Process*> workers;
  for (const char* n : {"a", "b", "c"}) workers.push_back(&c.start_worker(n));
  v1::Run run;
  ASSERT_TRUE(c.submit(run_request(4, 12, 3, 1), &run).ok());
  ASSERT_TRUE(c.wait_done(run.run_id(), 480)) << c.evod().log();
  auto st = c.status(run.run_id());
  EXPECT_EQ(st.evaluations_done(), 48);
  EXPECT_TRUE(st.estimated());
  auto board = c.leaderboard(run.run_id(), 10);
  ASSERT_EQ(board.elites_size(), 3);
  for (int i = 0; i < board.elites_size(); ++i) {
    EXPECT_EQ(board.elites(i).rank(), i + 1);
    EXPECT_TRUE(board.elites(i).estimated());
    if (i) {
      EXPECT_LE(board.elites(i - 1).fitness_us(), board.elites(i).fitness_us());
    }
  }
  EXPECT_GT(board.seed_us(), 0);
  EXPECT_EQ(st.best_us(), board.elites(0).fitness_us());
  expect_each_candidate_counted_once(c.db(), run.run_id());
  int candidate_lines = 0;
  for (Process* w : workers) candidate_lines += expect_candidate_lines_name_their_ids(w->log());
  EXPECT_GE(candidate_lines, 48) << "each evaluation writes at least one line about its genome";
}

TEST(Loopback, SameRngSeedGivesTheSameGenomeSequence) {
  std::vector<std::string> first, second;
  for (auto* out : {&first, &second}) {
    Cluster c;  // a fresh database each time: no result cache to lean on
    c.start_evod();
    c.start_worker("a");
    c.start_worker("b");
    v1::Run run;
    ASSERT_TRUE(c.submit(run_request(3, 8, 2, 77), &run).ok());
    // Each would-be elite is measured by both workers: about 34 evaluations, not 24.
    ASSERT_TRUE(c.wait_done(run.run_id(), 480)) << c.evod().log();
    *out = genomes_of(c.db(), run.run_id());
  }
  EXPECT_EQ(first.size(), 24u);
  EXPECT_EQ(first, second);
}

TEST(Loopback, WorkerKilledMidLeaseHasItsCandidatesLeasedAgain) {
  Cluster c;
  c.start_evod(1500);
  // Its own empty compile cache keeps each lease open for a compile: on the shared cache, once
  // warm, the worker finished the whole run before a lease could be seen.
  Process& doomed = c.start_worker("doomed", c.dir() + "/doomed-cache");
  v1::Run run;
  ASSERT_TRUE(c.submit(run_request(2, 8, 2, 5), &run).ok());
  ASSERT_TRUE(eventually(60, [&] {
    return DbReader(c.db()).count("SELECT COUNT(*) FROM candidates WHERE state = 'leased'") > 0;
  }));
  doomed.kill(SIGKILL);
  doomed.wait();
  c.start_worker("b");
  c.start_worker("c");
  ASSERT_TRUE(c.wait_done(run.run_id(), 300)) << c.evod().log();
  DbReader r(c.db());
  EXPECT_GE(r.count("SELECT COUNT(*) FROM leases WHERE outcome = 'expired'"), 1);
  EXPECT_GE(r.count("SELECT COUNT(*) FROM candidates WHERE attempts > 0"), 1);
  EXPECT_EQ(c.status(run.run_id()).evaluations_done(), 16);
  expect_each_candidate_counted_once(c.db(), run.run_id());
}

TEST(Loopback, EvodKilledAndRestartedResumesWithEveryReportKept) {
  Cluster c;
  c.start_evod();
  c.start_worker("a");
  c.start_worker("b");
  v1::Run run;
  ASSERT_TRUE(c.submit(run_request(3, 8, 2, 9), &run).ok());
  ASSERT_TRUE(eventually(120, [&] { return DbReader(c.db()).count("SELECT COUNT(*) FROM evaluations") >= 4; }));
  c.evod().kill(SIGKILL);
  c.evod().wait();
  std::vector<std::string> before =
      DbReader(c.db()).column("SELECT id || ':' || COALESCE(lease_id, '') || ':' || hex(blob) FROM evaluations "
                              "WHERE worker_id != ? ORDER BY id",
                              "-");
  ASSERT_GE(before.size(), 4u);
  c.start_evod();  // same database, same port: the workers reconnect on their own
  ASSERT_TRUE(c.wait_done(run.run_id(), 300)) << c.evod().log();
  std::vector<std::string> after =
      DbReader(c.db()).column("SELECT id || ':' || COALESCE(lease_id, '') || ':' || hex(blob) FROM evaluations "
                              "WHERE worker_id != ? ORDER BY id",
                              "-");
  std::set<std::string> kept(after.begin(), after.end());
  for (const auto& row : before) EXPECT_TRUE(kept.count(row)) << row.substr(0, 40);
  EXPECT_EQ(c.status(run.run_id()).evaluations_done(), 24);
  expect_each_candidate_counted_once(c.db(), run.run_id());
}

TEST(Loopback, StartGenomesLeadGenerationZeroAcrossAnEvodRestart) {
  Cluster c;
  c.start_evod();
  v1::Run run;
  auto req = run_request(2, 3, 1, 4);
  req.add_start_genomes("BLOCK_N=128,BLOCK_M=64");
  ASSERT_TRUE(c.submit(req, &run).ok());
  const std::string canonical = "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,";
  ASSERT_EQ(run.start_genomes_size(), 1);
  EXPECT_EQ(run.start_genomes(0).rfind(canonical, 0), 0u) << run.start_genomes(0);
  c.evod().kill(SIGKILL);
  c.evod().wait();
  c.start_evod();
  c.start_worker("a");
  ASSERT_TRUE(c.wait_done(run.run_id(), 300)) << c.evod().log();
  auto st = c.status(run.run_id());
  ASSERT_EQ(st.run().start_genomes_size(), 1);
  EXPECT_EQ(st.run().start_genomes(0), run.start_genomes(0));
  DbReader r(c.db());
  EXPECT_EQ(r.column("SELECT genome FROM candidates WHERE run_id = ? AND op = 'start' AND generation = 0", run.run_id()),
            std::vector<std::string>{run.start_genomes(0)});
  EXPECT_EQ(r.count("SELECT COUNT(*) FROM candidates WHERE run_id = ? AND op = 'start'", run.run_id()), 1);
  EXPECT_EQ(st.evaluations_done(), 6);
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.start_evod();
    v1::Run run;
    ASSERT_TRUE(c_.submit(run_request(1, 2, 1, 3), &run).ok());
    run_id_ = run.run_id();
  }
  std::string dump() { return Store(c_.db()).dump(); }
  Cluster c_;
  std::string run_id_;
};

TEST_F(BadInput, SubmissionsGetInvalidArgumentAndChangeNothing) {
  std::string before = dump();
  v1::Run run;
  auto req = run_request(1, 4, 1, 1);
  req.set_seed("x");
  auto s = c_.submit(req, &run);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("unknown seed 'x'", 0), 0u) << s.error_message();
  req = run_request(1, 4, 1, 1);
  req.add_shapes("1x8x512");
  s = c_.submit(req, &run);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("1x8x512"), std::string::npos) << s.error_message();
  req = run_request(1, 0, 1, 1);
  s = c_.submit(req, &run);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("population"), std::string::npos) << s.error_message();
  req = run_request(1, 4, 1, 1);
  req.add_start_genomes("BLOCK_M=64");
  req.add_start_genomes("BLOCK_M=48");
  s = c_.submit(req, &run);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "start genome 'BLOCK_M=48': BLOCK_M=48 is outside its domain {16, 32, 64, 128}");
  EXPECT_EQ(dump(), before);
}

TEST_F(BadInput, UnknownRunIsNotFound) {
  std::string before = dump();
  grpc::ClientContext ctx;
  v1::RunRef ref;
  ref.set_run_id("run-9999");
  v1::RunStatus st;
  auto s = c_.client().GetRun(&ctx, ref, &st);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "unknown run 'run-9999'");
  EXPECT_EQ(dump(), before);
}

TEST_F(BadInput, ReportOnALeaseNotHeldIsRefused) {
  std::map<std::string, std::string> credentials;  // worker id -> its credential
  auto register_fake = [&](const std::string& name) {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    req.mutable_device()->set_device_class("sm_90a/model/estimated");
    req.mutable_device()->set_backend("model");
    for (auto& f : template_fingerprints()) req.mutable_device()->add_template_fingerprints(std::move(f));
    v1::RegisterWorkerResponse resp;
    EXPECT_TRUE(c_.client().RegisterWorker(&ctx, req, &resp).ok());
    credentials[resp.worker_id()] = resp.credential();
    return resp.worker_id();
  };
  std::string holder = register_fake("holder"), other = register_fake("other");
  v1::LeaseResponse leases;
  {
    grpc::ClientContext ctx;
    v1::LeaseRequest req;
    req.set_worker_id(holder);
    req.set_credential(credentials[holder]);
    ASSERT_TRUE(c_.client().LeaseCandidates(&ctx, req, &leases).ok());
    ASSERT_EQ(leases.leases_size(), 1);
  }
  std::string before = dump();
  auto report = [&](const std::string& worker, const std::string& lease_id) {
    grpc::ClientContext ctx;
    v1::ReportRequest req;
    req.set_worker_id(worker);
    req.set_credential(credentials[worker]);
    req.set_lease_id(lease_id);
    req.mutable_evaluation()->set_status(v1::OK);
    req.mutable_evaluation()->set_fitness_us(10);
    req.mutable_evaluation()->set_estimated(true);
    req.mutable_evaluation()->mutable_device()->set_device_class("sm_90a/model/estimated");
    v1::ReportResponse resp;
    return c_.client().ReportResult(&ctx, req, &resp);
  };
  auto s = report(other, leases.leases(0).lease_id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("not held by worker"), std::string::npos) << s.error_message();
  s = report(holder, "l-0000000000000000");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(dump(), before);
  // The holder's own report goes through, and its repeat is a harmless duplicate.
  EXPECT_TRUE(report(holder, leases.leases(0).lease_id()).ok());
  std::string after_report = dump();
  EXPECT_TRUE(report(holder, leases.leases(0).lease_id()).ok());
  EXPECT_EQ(dump(), after_report);
}

TEST(Evod, MissingDatabaseDirectoryIsOneLineAndNonZeroExit) {
  Cluster c;
  Process evod({EVOD_BIN, "serve", "--db", c.dir() + "/missing/evo.db", "--listen", c.address()},
               c.dir() + "/evod.log");
  EXPECT_EQ(evod.wait(), 1);
  std::string log = evod.log();
  EXPECT_NE(log.find("does not exist"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

TEST(Evod, HelpDescribesServe) {
  Cluster c;
  Process evod({EVOD_BIN, "--help"}, c.dir() + "/help.log");
  EXPECT_EQ(evod.wait(), 0);
  EXPECT_NE(evod.log().find("--lease-ttl-ms"), std::string::npos);
}

TEST(Worker, CudaBackendWithoutGpuSaysSoInOneLine) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU is present: the cuda backend would start";
  Cluster c;
  Process worker({EVO_WORKER_BIN, "--coordinator", c.address(), "--backend", "cuda"}, c.dir() + "/worker.log");
  EXPECT_EQ(worker.wait(), 1);
  std::string log = worker.log();
  EXPECT_NE(log.find("--backend model"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

// Answers RegisterWorker as evod answers a worker built from other template code, and keeps the
// fingerprints the worker reported.
class RefusingCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest* req,
                              v1::RegisterWorkerResponse*) override {
    std::lock_guard<std::mutex> lock(mutex_);
    reported_.assign(req->device().template_fingerprints().begin(),
                     req->device().template_fingerprints().end());
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "register: the worker's template fa_s512_v3@0123456789abcdef is not evod's"};
  }
  std::vector<std::string> reported() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reported_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> reported_;
};

// A RefusingCoordinator served on a free loopback port.
struct RefusingEvod {
  RefusingCoordinator service;
  std::unique_ptr<grpc::Server> server;
  std::string address;

  RefusingEvod() {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    address = "127.0.0.1:" + std::to_string(port);
  }
  ~RefusingEvod() { server->Shutdown(); }
};

TEST(Worker, ReportsItsTemplatesAndStopsWhenEvodRefusesThem) {
  Cluster c;
  RefusingEvod evod;
  ASSERT_TRUE(evod.server);
  Process worker({EVO_WORKER_BIN, "--coordinator", evod.address, "--backend", "model"}, c.dir() + "/worker.log");
  EXPECT_EQ(worker.wait(), 1);
  EXPECT_EQ(evod.service.reported(), template_fingerprints());
  const std::string log = worker.log();
  EXPECT_NE(log.find("event=register_failed"), std::string::npos) << log;
  EXPECT_NE(log.find("is not evod's"), std::string::npos) << log;
}

// The address comes from $EVO_COORDINATOR, as evoctl's does, unless --coordinator names one.
TEST(Worker, FindsEvodThroughTheEnvironmentUnlessTold) {
  Cluster c;
  RefusingEvod evod;
  ASSERT_TRUE(evod.server);
  const std::string nowhere = "127.0.0.1:" + std::to_string(free_port());
  {
    Process worker({EVO_WORKER_BIN, "--backend", "model"}, c.dir() + "/env.log", EVO_TEST_CACHE_DIR,
                   {{"EVO_COORDINATOR", evod.address}});
    EXPECT_EQ(worker.wait(), 1) << worker.log();
    EXPECT_EQ(evod.service.reported(), template_fingerprints()) << worker.log();
  }
  {
    // Reaching the refusing evod ends the worker at once; the address in the environment would
    // leave it retrying.
    Process worker({EVO_WORKER_BIN, "--backend", "model", "--coordinator", evod.address},
                   c.dir() + "/flag.log", EVO_TEST_CACHE_DIR, {{"EVO_COORDINATOR", nowhere}});
    EXPECT_EQ(worker.wait(), 1) << "the flag wins\n" << worker.log();
  }
}

}  // namespace
}  // namespace evo::it
