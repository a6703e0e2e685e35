// The shared token end to end on loopback: evod with --token-file, an evo-worker (model backend)
// and evoctl that present it finish a run; clients without it are refused; evod refuses to listen
// beyond loopback without a token, and on a port another evod serves.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "process_harness.h"

namespace evo::it {
namespace {

const std::string kToken = "it-token-0123456789abcdef";

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class SecuredCluster {
 public:
  SecuredCluster() : port_(free_port()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "evo-sec-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    token_file_ = dir_ + "/token";
    std::ofstream(token_file_) << kToken << "\n";
    chmod(token_file_.c_str(), 0600);
  }
  ~SecuredCluster() {
    processes_.clear();
    if (!std::getenv("EVO_KEEP_TEST_DIRS")) std::filesystem::remove_all(dir_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& token_file() const { return token_file_; }
  const std::string& dir() const { return dir_; }

  Process& start(const std::string& log, std::vector<std::string> argv) {
    processes_.push_back(std::make_unique<Process>(argv, dir_ + "/" + log));
    return *processes_.back();
  }
  Process& start_evod(std::vector<std::string> extra) {
    std::vector<std::string> argv = {EVOD_BIN, "serve", "--db", dir_ + "/evo.db", "--lease-ttl-ms", "3000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return start("evod.log", argv);
  }
  // Runs evoctl to the end; returns its exit status, with stdout+stderr in *output.
  int evoctl(std::vector<std::string> args, std::string* output, int timeout_ms = 300000) {
    std::vector<std::string> argv = {EVOCTL_BIN, "--coordinator", address()};
    argv.insert(argv.end(), args.begin(), args.end());
    Process& p = start("evoctl-" + std::to_string(processes_.size()) + ".log", argv);
    int rc = p.wait(timeout_ms);
    *output = p.log();
    return rc;
  }
  bool wait_listening() {
    auto channel = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }

 private:
  int port_;
  std::string dir_, token_file_;
  std::vector<std::unique_ptr<Process>> processes_;
};

TEST(Security, WorkerAndEvoctlWithTheTokenFinishARun) {
  SecuredCluster c;
  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.token_file()});
  ASSERT_TRUE(c.wait_listening()) << evod.log();
  c.start("worker.log", {EVO_WORKER_BIN, "--coordinator", c.address(), "--backend", "model", "--name", "sec",
                         "--token-file", c.token_file()});
  std::string out;
  int rc = c.evoctl({"--token-file", c.token_file(), "submit", "--seed", "fa_s512_v3", "--generations", "1",
                     "--population", "3", "--top-k", "1", "--watch"},
                    &out);
  EXPECT_EQ(rc, 0) << out << evod.log();
  EXPECT_NE(out.find(" DONE"), std::string::npos) << out;

  rc = c.evoctl({"--token-file", c.token_file(), "leaderboard"}, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("BLOCK_M="), std::string::npos) << out;
  EXPECT_NE(evod.log().find("event=security auth=token"), std::string::npos);
}

TEST(Security, ClientsWithoutTheRightTokenAreRefused) {
  SecuredCluster c;
  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.token_file()});
  ASSERT_TRUE(c.wait_listening()) << evod.log();

  std::string out;
  EXPECT_EQ(c.evoctl({"runs"}, &out), 1);
  EXPECT_EQ(trimmed(out).find('\n'), std::string::npos) << "one line: " << out;
  EXPECT_NE(out.find("UNAUTHENTICATED"), std::string::npos) << out;

  const std::string wrong = c.dir() + "/wrong";
  std::ofstream(wrong) << "not-the-token-0123456789\n";
  EXPECT_EQ(c.evoctl({"--token-file", wrong, "submit", "--seed", "fa_s512_v3"}, &out), 1);
  EXPECT_NE(out.find("wrong token"), std::string::npos) << out;

  // A worker without the token gives up at registration instead of retrying forever.
  Process& worker = c.start("worker.log", {EVO_WORKER_BIN, "--coordinator", c.address(), "--backend", "model"});
  EXPECT_EQ(worker.wait(60000), 1) << worker.log();
  EXPECT_NE(worker.log().find("requires a token"), std::string::npos) << worker.log();
  // The first refusal is logged whole; later ones within 10 s (the wrong token, the worker's) are
  // counted into one line once the interval has passed, written by evod's periodic sweep (or, on
  // a host slow enough to space them out, logged whole).
  EXPECT_NE(evod.log().find("event=unauthenticated rpc=ListRuns"), std::string::npos) << evod.log();
  EXPECT_TRUE(eventually(20, [&] {
    const std::string log = evod.log();
    return log.find("event=unauthenticated_more count=") != std::string::npos ||
           log.find("event=unauthenticated rpc=RegisterWorker") != std::string::npos;
  })) << evod.log();

  // The refused submit stored nothing.
  EXPECT_EQ(c.evoctl({"--token-file", c.token_file(), "runs", "--json"}, &out), 0) << out;
  EXPECT_EQ(out.find("runId"), std::string::npos) << out;
}

TEST(Security, EvodRefusesANonLoopbackListenWithoutAToken) {
  SecuredCluster c;
  const std::string wildcard = "0.0.0.0:" + std::to_string(free_port());
  Process& refused = c.start_evod({"--listen", wildcard});
  EXPECT_EQ(refused.wait(), 2);
  const std::string line = trimmed(refused.log());
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("refusing to listen on " + wildcard), std::string::npos) << line;
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/evo.db")) << "refused before opening the database";

  // With a token, or with --insecure said out loud, it serves.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--token-file", c.token_file()},
                                                std::vector<std::string>{"--insecure"}}) {
    Process& serving = c.start_evod([&] {
      std::vector<std::string> a = {"--listen", "0.0.0.0:" + std::to_string(free_port())};
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    }());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_TRUE(serving.running()) << serving.log();
    serving.kill(SIGTERM);
    EXPECT_EQ(serving.wait(), 0) << serving.log();
  }
}

// A second evod on a port another already serves must not share it: with the socket option gRPC
// sets by default both would bind, and the clients' calls would be split between two databases.
TEST(Security, ASecondEvodOnABusyPortRefusesToServe) {
  SecuredCluster c;
  Process& first = c.start_evod({"--listen", c.address()});
  ASSERT_TRUE(c.wait_listening()) << first.log();
  Process& second =
      c.start("evod-second.log", {EVOD_BIN, "serve", "--db", c.dir() + "/other.db", "--listen", c.address()});
  EXPECT_EQ(second.wait(20000), 1) << second.log();
  EXPECT_NE(second.log().find("evod: cannot listen on " + c.address() + " (in use by another process: "),
            std::string::npos)
      << second.log();
  EXPECT_EQ(second.log().find("event=serving"), std::string::npos) << second.log();
  EXPECT_TRUE(first.running()) << first.log();
}

TEST(Security, UnreadableTokenFileIsOneLine) {
  SecuredCluster c;
  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.dir() + "/missing"});
  EXPECT_EQ(evod.wait(), 2);
  const std::string line = trimmed(evod.log());
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("cannot read token file"), std::string::npos) << line;
}

TEST(Security, TokenFileThatIsADirectoryIsNamedSo) {
  SecuredCluster c;
  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.dir()});
  EXPECT_EQ(evod.wait(), 2);
  const std::string line = trimmed(evod.log());
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("is a directory"), std::string::npos) << line;
  EXPECT_EQ(line.find("empty"), std::string::npos) << line;
}

TEST(Security, TokenFileOpenToOtherUsersIsWarnedOnce) {
  SecuredCluster c;
  chmod(c.token_file().c_str(), 0644);
  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.token_file()});
  ASSERT_TRUE(c.wait_listening()) << evod.log();
  const std::string log = evod.log();
  EXPECT_NE(log.find("event=token_file_readable token file '" + c.token_file() + "' is open to other users (mode 0644)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("event=token_file_readable"), log.rfind("event=token_file_readable")) << log;
}

// Two self-signed certificates for 127.0.0.1 (names a and b), made with the openssl command line.
bool make_certificates(const std::string& dir) {
  for (const char* name : {"a", "b"}) {
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=evod-test -addext "
                            "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout '" + dir + "/" + name +
                            ".key' -out '" + dir + "/" + name + ".pem' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return false;
  }
  return true;
}

// A certificate with another certificate's key is a TLS problem, not a busy port.
TEST(Security, TlsKeyOfAnotherCertificateIsNamedNotABusyPort) {
  SecuredCluster c;
  if (!make_certificates(c.dir())) GTEST_SKIP() << "the openssl command cannot make test certificates";
  Process& evod = c.start_evod({"--listen", c.address(), "--tls-cert", c.dir() + "/a.pem", "--tls-key",
                                c.dir() + "/b.key"});
  EXPECT_EQ(evod.wait(), 2);
  const std::string line = trimmed(evod.log());
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("TLS key '" + c.dir() + "/b.key' is not the key of certificate '" + c.dir() + "/a.pem'"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("in use"), std::string::npos) << line;
}

// evoctl that trusts the wrong CA reaches a running evod: the line says the handshake failed.
TEST(Security, EvoctlWithTheWrongCaSaysTheHandshakeFailed) {
  SecuredCluster c;
  if (!make_certificates(c.dir())) GTEST_SKIP() << "the openssl command cannot make test certificates";
  Process& evod = c.start_evod({"--listen", c.address(), "--tls-cert", c.dir() + "/a.pem", "--tls-key",
                                c.dir() + "/a.key", "--token-file", c.token_file()});
  ASSERT_TRUE(it::eventually(20, [&] { return evod.log().find("event=serving") != std::string::npos; })) << evod.log();
  std::string out;
  EXPECT_EQ(c.evoctl({"--tls-ca", c.dir() + "/b.pem", "--token-file", c.token_file(), "runs"}, &out), 1) << out;
  EXPECT_NE(out.find("but the TLS handshake failed: is --tls-ca the CA that signed evod's certificate"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("is it running"), std::string::npos) << out;
  // The right CA is served.
  EXPECT_EQ(c.evoctl({"--tls-ca", c.dir() + "/a.pem", "--token-file", c.token_file(), "runs"}, &out), 0) << out;
}

// Enrolments end to end: the operator enrols a host on evod's database (`evod enrol`), evod
// serves --enrolled-workers-only, a worker with only the token is refused at registration in one
// line, the key holder's worker finishes a run and is listed under its enrolment, and a revocation
// made while evod serves stops that worker at its next call.
TEST(Security, EnrolledWorkersOnlyTakesTheKeyHoldersWorkerAndRefusesTheRest) {
  SecuredCluster c;
  const std::string db = c.dir() + "/evo.db", key = c.dir() + "/host-a.key";
  auto evod_enrol = [&](std::vector<std::string> args, std::string* out) {
    std::vector<std::string> argv = {EVOD_BIN, "enrol", "--db", db};
    argv.insert(argv.end(), args.begin(), args.end());
    Process& p = c.start("enrol-" + std::to_string(std::rand()) + ".log", argv);
    const int rc = p.wait(20000);
    *out = p.log();
    return rc;
  };
  std::string out;
  ASSERT_EQ(evod_enrol({"host-a", "--key-file", key}, &out), 0) << out;
  struct stat st {};
  ASSERT_EQ(stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(evod_enrol({"host-a", "--key-file", key}, &out), 2) << "a key file is never overwritten";
  EXPECT_NE(out.find("exists"), std::string::npos) << out;
  EXPECT_EQ(evod_enrol({"--revoke", "nobody"}, &out), 1);
  EXPECT_NE(out.find("there is no enrolment 'nobody'"), std::string::npos) << out;
  // Bad input: one line each, exit 2, nothing made.
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {}, {"a b"}, {"--revoke"}, {"--list", "--revoke", "host-a"}, {"--list", "--key-file", c.dir() + "/k2"},
           {"host-b", "--wat"}}) {
    EXPECT_EQ(evod_enrol(bad, &out), 2) << out;
    EXPECT_NE(out.find("(see evod enrol --help)"), std::string::npos) << out;
  }
  EXPECT_EQ(evod_enrol({"--list"}, &out), 0) << out;
  EXPECT_EQ(out.find("host-b"), std::string::npos) << out;

  Process& evod = c.start_evod({"--listen", c.address(), "--token-file", c.token_file(), "--enrolled-workers-only"});
  ASSERT_TRUE(c.wait_listening()) << evod.log();
  EXPECT_NE(evod.log().find("workers=enrolled-only"), std::string::npos) << evod.log();
  Process& stranger = c.start("stranger.log", {EVO_WORKER_BIN, "--coordinator", c.address(), "--backend", "model",
                                               "--token-file", c.token_file()});
  EXPECT_EQ(stranger.wait(60000), 1) << stranger.log();
  EXPECT_NE(stranger.log().find("takes only enrolled workers"), std::string::npos) << stranger.log();

  Process& enrolled = c.start("enrolled.log", {EVO_WORKER_BIN, "--coordinator", c.address(), "--backend", "model",
                                               "--name", "host-a:model", "--token-file", c.token_file(),
                                               "--enrolment-key-file", key});
  int rc = c.evoctl({"--token-file", c.token_file(), "submit", "--seed", "fa_s512_v3", "--generations", "1",
                     "--population", "3", "--top-k", "1", "--watch"},
                    &out);
  EXPECT_EQ(rc, 0) << out << enrolled.log();
  EXPECT_NE(out.find(" DONE"), std::string::npos) << out;
  EXPECT_EQ(c.evoctl({"--token-file", c.token_file(), "workers"}, &out), 0) << out;
  EXPECT_NE(out.find("host-a:model  host-a "), std::string::npos) << out;

  ASSERT_EQ(evod_enrol({"--revoke", "host-a"}, &out), 0) << out;
  EXPECT_EQ(enrolled.wait(60000), 1) << enrolled.log();
  EXPECT_NE(enrolled.log().find("revoked by the operator"), std::string::npos) << enrolled.log();
  EXPECT_EQ(evod_enrol({"--list"}, &out), 0) << out;
  EXPECT_NE(out.find("host-a  key made "), std::string::npos) << out;
  EXPECT_NE(out.find("REFUSED: revoked by the operator"), std::string::npos) << out;
  EXPECT_TRUE(evod.running()) << evod.log();
}

}  // namespace
}  // namespace evo::it
