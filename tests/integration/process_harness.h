#pragma once
// Real evod and evo-worker processes on loopback for the integration tests: start, signal, wait,
// and a gRPC client. Each test gets its own temporary directory (database, logs); the NVRTC
// compile cache is shared by every test through EVO_CACHE_DIR, so a kernel variant compiles once.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "evo/evo.grpc.pb.h"

namespace evo::it {

class Process {
 public:
  // env: variables set in the child besides EVO_CACHE_DIR.
  Process(const std::vector<std::string>& argv, const std::string& log_path,
          const std::string& cache_dir = EVO_TEST_CACHE_DIR,
          const std::vector<std::pair<std::string, std::string>>& env = {})
      : log_(log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      setenv("EVO_CACHE_DIR", cache_dir.c_str(), 1);
      for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Process() {
    if (running()) {
      kill(SIGKILL);
      wait();
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  void kill(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Exit status (or 128 + signal); -1 on timeout.
  int wait(int timeout_ms = 20000) {
    if (exited_) return status_;
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  bool running() { return !exited_ && wait(0) == -1; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
  bool exited_ = false;
  int status_ = -1;
};

inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

// Polls cond every 100 ms until it holds or timeout_s passes.
inline bool eventually(int timeout_s, const std::function<bool()>& cond) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return cond();
}

class Cluster {
 public:
  Cluster() : port_(free_port()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "evo-it-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    db_ = dir_ + "/evo.db";
  }
  ~Cluster() {
    workers_.clear();
    evod_.reset();
    if (!std::getenv("EVO_KEEP_TEST_DIRS")) std::filesystem::remove_all(dir_);
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& db() const { return db_; }
  const std::string& dir() const { return dir_; }

  void start_evod(int lease_ttl_ms = 2000) {
    evod_ = std::make_unique<Process>(
        std::vector<std::string>{EVOD_BIN, "serve", "--db", db_, "--listen", address(), "--lease-ttl-ms",
                                 std::to_string(lease_ttl_ms)},
        dir_ + "/evod.log");
    auto channel = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stub_ = v1::Coordinator::NewStub(channel);
  }
  Process& evod() { return *evod_; }

  // cache_dir: the shared cache by default; a test that needs a worker to hold its leases for a
  // while gives it an empty one, since on a warm cache a model evaluation takes milliseconds.
  Process& start_worker(const std::string& name, const std::string& cache_dir = EVO_TEST_CACHE_DIR) {
    workers_.push_back(std::make_unique<Process>(
        std::vector<std::string>{EVO_WORKER_BIN, "--coordinator", address(), "--backend", "model", "--name", name},
        dir_ + "/worker-" + name + ".log", cache_dir));
    return *workers_.back();
  }

  v1::Coordinator::Stub& client() { return *stub_; }

  grpc::Status submit(const v1::SubmitRunRequest& req, v1::Run* run) {
    grpc::ClientContext ctx;
    return stub_->SubmitRun(&ctx, req, run);
  }
  v1::RunStatus status(const std::string& run_id) {
    grpc::ClientContext ctx;
    v1::RunRef ref;
    ref.set_run_id(run_id);
    v1::RunStatus st;
    stub_->GetRun(&ctx, ref, &st);
    return st;
  }
  bool wait_done(const std::string& run_id, int timeout_s) {
    return eventually(timeout_s, [&] { return status(run_id).run().state() == v1::DONE; });
  }
  v1::LeaderboardResponse leaderboard(const std::string& run_id, int top) {
    grpc::ClientContext ctx;
    v1::LeaderboardRequest req;
    req.set_run_id(run_id);
    req.set_top(top);
    v1::LeaderboardResponse resp;
    stub_->Leaderboard(&ctx, req, &resp);
    return resp;
  }

 private:
  int port_;
  std::string dir_, db_;
  std::unique_ptr<Process> evod_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

inline v1::SubmitRunRequest run_request(int generations, int population, int top_k, uint64_t rng_seed) {
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_generations(generations);
  req.set_population(population);
  req.set_top_k(top_k);
  req.set_rng_seed(rng_seed);
  return req;
}

}  // namespace evo::it
