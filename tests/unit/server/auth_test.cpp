// The shared token at the gRPC edge: with a token set, every RPC without it (or with a wrong one)
// is refused UNAUTHENTICATED and changes nothing; with the right one it is served. TLS carries the
// same calls when evod has a certificate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "captured_log.h"
#include "client_security.h"
#include "rpc_fixture.h"

namespace evo {
namespace {

using Stub = v1::Coordinator::Stub;
const std::string kToken = "0123456789abcdef-test-token";

// One call of each RPC, with well-formed arguments, under the given authorization metadata.
std::vector<std::pair<std::string, std::function<grpc::Status(Stub&, const std::string&)>>> every_rpc() {
  using R = std::function<grpc::Status(Stub&, const std::string&)>;
  v1::RunRef ref;
  ref.set_run_id("r-0001");
  return {
      {"RegisterWorker", R([](Stub& s, const std::string& a) {
         v1::RegisterWorkerRequest r;
         *r.mutable_device() = test::test_device();
         v1::RegisterWorkerResponse resp;
         return s.RegisterWorker(test::context(a).get(), r, &resp);
       })},
      {"LeaseCandidates", R([](Stub& s, const std::string& a) {
         v1::LeaseRequest r;
         r.set_worker_id("w-1");
         v1::LeaseResponse resp;
         return s.LeaseCandidates(test::context(a).get(), r, &resp);
       })},
      {"ReportResult", R([](Stub& s, const std::string& a) {
         v1::ReportRequest r;
         r.set_worker_id("w-1");
         r.set_lease_id("l-1");
         r.mutable_evaluation()->set_status(v1::OK);
         r.mutable_evaluation()->set_fitness_us(1);
         v1::ReportResponse resp;
         return s.ReportResult(test::context(a).get(), r, &resp);
       })},
      {"Heartbeat", R([](Stub& s, const std::string& a) {
         v1::HeartbeatRequest r;
         r.set_worker_id("w-1");
         v1::HeartbeatResponse resp;
         return s.Heartbeat(test::context(a).get(), r, &resp);
       })},
      {"SubmitRun", R([](Stub& s, const std::string& a) {
         v1::SubmitRunRequest r;
         r.set_seed("fa_s512_v3");
         v1::Run resp;
         return s.SubmitRun(test::context(a).get(), r, &resp);
       })},
      {"GetRun", R([ref](Stub& s, const std::string& a) {
         v1::RunStatus resp;
         return s.GetRun(test::context(a).get(), ref, &resp);
       })},
      {"WatchRun", R([ref](Stub& s, const std::string& a) {
         auto ctx = test::context(a);
         auto reader = s.WatchRun(ctx.get(), ref);
         v1::RunStatus st;
         while (reader->Read(&st)) {
         }
         return reader->Finish();
       })},
      {"ListRuns", R([](Stub& s, const std::string& a) {
         v1::ListRunsResponse resp;
         return s.ListRuns(test::context(a).get(), v1::ListRunsRequest(), &resp);
       })},
      {"ListWorkers", R([](Stub& s, const std::string& a) {
         v1::ListWorkersResponse resp;
         return s.ListWorkers(test::context(a).get(), v1::ListWorkersRequest(), &resp);
       })},
      {"ListCandidates", R([ref](Stub& s, const std::string& a) {
         v1::ListCandidatesRequest r;
         r.set_run_id(ref.run_id());
         v1::ListCandidatesResponse resp;
         return s.ListCandidates(test::context(a).get(), r, &resp);
       })},
      {"Leaderboard", R([](Stub& s, const std::string& a) {
         v1::LeaderboardResponse resp;
         return s.Leaderboard(test::context(a).get(), v1::LeaderboardRequest(), &resp);
       })},
      {"CancelRun", R([ref](Stub& s, const std::string& a) {
         v1::Run resp;
         return s.CancelRun(test::context(a).get(), ref, &resp);
       })},
      {"ExportBest", R([](Stub& s, const std::string& a) {
         v1::ExportRequest r;
         r.set_run_id("r-0001");
         v1::ExportResponse resp;
         return s.ExportBest(test::context(a).get(), r, &resp);
       })},
  };
}

TEST(Auth, EveryRpcIsCoveredByTheTable) {
  std::set<std::string> names;
  for (const auto& [name, _] : every_rpc()) names.insert(name);
  const auto* service = v1::ReportRequest::descriptor()->file()->FindServiceByName("Coordinator");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->method_count(), static_cast<int>(names.size()));
  for (int i = 0; i < service->method_count(); ++i) EXPECT_TRUE(names.count(service->method(i)->name()));
}

TEST(Auth, CallsWithoutTheTokenAreRefusedAndChangeNothing) {
  test::InProcessEvod evod(kToken);
  ASSERT_TRUE(evod.started());
  auto stub = evod.stub();
  const std::string before = evod.store().dump();
  struct Attempt {
    const char* what;
    std::string authorization;
    const char* says;
  };
  const std::vector<Attempt> attempts = {
      {"no metadata", "", "requires a token"},
      {"wrong token", "Bearer " + kToken + "x", "wrong token"},
      {"prefix of the token", "Bearer " + kToken.substr(0, 8), "wrong token"},
      {"empty bearer", "Bearer ", "wrong token"},
      {"other scheme", "Basic " + kToken, "Bearer"},
      {"bare token", kToken, "Bearer"},
  };
  for (const auto& [rpc, call] : every_rpc()) {
    for (const auto& a : attempts) {
      SCOPED_TRACE(rpc + std::string(": ") + a.what);
      grpc::Status s = call(*stub, a.authorization);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
      EXPECT_NE(s.error_message().find(a.says), std::string::npos) << s.error_message();
      EXPECT_EQ(s.error_message().find(kToken), std::string::npos) << "the token leaked into a message";
    }
  }
  EXPECT_TRUE(evod.store().dump() == before) << "a refused call changed the database";
}

TEST(Auth, TheRightTokenIsServed) {
  test::InProcessEvod evod(kToken);
  ASSERT_TRUE(evod.started());
  auto stub = evod.stub();
  for (const auto& [rpc, call] : every_rpc()) {
    SCOPED_TRACE(rpc);
    grpc::Status s = call(*stub, "Bearer " + kToken);
    // Past the gate: each answers as an open evod would (ids of the table do not exist).
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  v1::ListRunsResponse runs;
  ASSERT_TRUE(stub->ListRuns(test::context("Bearer " + kToken).get(), v1::ListRunsRequest(), &runs).ok());
  EXPECT_EQ(runs.runs_size(), 1) << "the SubmitRun of the table was served";
}

TEST(Auth, WithoutATokenEvodIsOpen) {
  test::InProcessEvod evod;
  ASSERT_TRUE(evod.started());
  v1::ListRunsResponse runs;
  EXPECT_TRUE(evod.stub()->ListRuns(test::context().get(), v1::ListRunsRequest(), &runs).ok());
}

// A peer hammering evod without the token must not fill its disk with log lines: the first
// refusal is logged, the rest are counted (security/refusal_log.h).
TEST(Auth, AFloodOfRefusedCallsIsLoggedOnceAndCounted) {
  test::InProcessEvod evod(kToken);
  ASSERT_TRUE(evod.started());
  auto stub = evod.stub();
  test::CapturedLog log;
  v1::ListRunsResponse runs;
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(stub->ListRuns(test::context("Bearer wrong-token-0123456789").get(), v1::ListRunsRequest(), &runs)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(log.count("event=unauthenticated "), 1u) << log.text().substr(0, 2000);
  EXPECT_EQ(log.count("\n"), 1u) << log.text().substr(0, 2000);
}

// A self-signed certificate for 127.0.0.1 made with the openssl command line.
bool make_certificate(const std::string& dir) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=evod-test -addext "
                          "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout '" + dir + "/key.pem' -out '" + dir +
                          "/cert.pem' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(Auth, TlsCarriesTheTokenAndRefusesPlaintextClients) {
  test::TempDir dir;
  if (!make_certificate(dir.path())) GTEST_SKIP() << "the openssl command cannot make a test certificate";
  GrpcServerConfig config;
  config.tls_cert_pem = security::read_pem_file(dir.file("cert.pem"), "cert");
  config.tls_key_pem = security::read_pem_file(dir.file("key.pem"), "key");
  test::InProcessEvod evod(kToken, config);
  ASSERT_TRUE(evod.started());

  security::ClientSecurity sec;
  sec.tls = true;
  sec.tls_ca_pem = config.tls_cert_pem;
  sec.token = kToken;
  auto tls_stub = evod.stub(security::channel_credentials(sec));
  grpc::ClientContext ctx;
  security::attach_token(ctx, sec);
  v1::ListRunsResponse runs;
  grpc::Status ok = tls_stub->ListRuns(&ctx, v1::ListRunsRequest(), &runs);
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  auto tls_no_token = evod.stub(security::channel_credentials(sec));
  EXPECT_EQ(tls_no_token->ListRuns(test::context().get(), v1::ListRunsRequest(), &runs).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  auto plain = evod.stub();
  auto ctx2 = test::context("Bearer " + kToken);
  ctx2->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_EQ(plain->ListRuns(ctx2.get(), v1::ListRunsRequest(), &runs).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace evo
