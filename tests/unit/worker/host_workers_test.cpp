// Several workers on one host: the plan (arguments, names, compile threads), the supervisor with
// stand-in children (/bin/sh), and evo-worker --all-gpus / --workers N as a process. No GPU, no evod.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "host_resources.h"
#include "host_workers.h"
#include "supervisor.h"

namespace evo {
namespace {

namespace fs = std::filesystem;

HostFacts facts(int gpus, int cores = 16) {
  HostFacts f;
  f.self_exe = "/opt/evo/bin/evo-worker";
  f.host_name = "node7";
  f.cores = cores;
  f.gpu_count = [gpus] {
    if (gpus < 0)
      throw std::runtime_error("no GPU found (CUDA driver version is insufficient for CUDA runtime version); "
                               "use --backend model");
    return gpus;
  };
  return f;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(CompileThreads, TheHostsCoresDividedByItsWorkersAtLeastOne) {
  EXPECT_EQ(default_compile_threads(128, 8), 16);
  EXPECT_EQ(default_compile_threads(16, 3), 5);
  EXPECT_EQ(default_compile_threads(2, 8), 1);
  EXPECT_EQ(default_compile_threads(12, 1), 12);
  EXPECT_EQ(default_compile_threads(12, 0), 12);
  EXPECT_GE(host_cores(), 1);
}

TEST(HostWorkersPlan, OneWorkerPerGpuEachPinnedAndNamed) {
  auto plan = plan_host_workers(words("--coordinator evod:50051 --all-gpus --max-inflight 3"), facts(4, 16));
  ASSERT_EQ(plan.exit_status, -1) << plan.error;
  ASSERT_EQ(plan.workers.size(), 4u);
  EXPECT_EQ(plan.compile_threads, 4);
  EXPECT_EQ(plan.workers[2].label, "the worker on GPU 2");
  EXPECT_EQ(plan.workers[2].name, "node7:gpu2");
  EXPECT_EQ(plan.workers[2].argv,
            words("/opt/evo/bin/evo-worker --coordinator evod:50051 --max-inflight 3 --gpu 2 --name node7:gpu2 "
                  "--compile-threads 4"));
}

TEST(HostWorkersPlan, GivenCompileThreadsAndNamePrefixWin) {
  auto plan = plan_host_workers(words("--all-gpus --compile-threads 3 --name rack2"), facts(2, 64));
  ASSERT_EQ(plan.exit_status, -1) << plan.error;
  EXPECT_EQ(plan.compile_threads, 3);
  EXPECT_EQ(plan.workers[1].argv, words("/opt/evo/bin/evo-worker --gpu 1 --name rack2:gpu1 --compile-threads 3"));
}

TEST(HostWorkersPlan, ModelWorkersShareTheCoresAndTakeNoGpu) {
  auto plan = plan_host_workers(words("--backend model --workers 3"), facts(-1, 2));
  ASSERT_EQ(plan.exit_status, -1) << plan.error;
  ASSERT_EQ(plan.workers.size(), 3u);
  EXPECT_EQ(plan.compile_threads, 1);
  EXPECT_EQ(plan.workers[0].label, "model worker 0");
  EXPECT_EQ(plan.workers[2].argv,
            words("/opt/evo/bin/evo-worker --backend model --name node7:model2 --compile-threads 1"));
}

TEST(HostWorkersPlan, EachBadCombinationGetsItsLine) {
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"--all-gpus --gpu 1", "--all-gpus takes no --gpu: it starts a worker on every visible GPU"},
      {"--all-gpus --backend model", "for model workers give --backend model --workers N"},
      {"--all-gpus --workers 2", "--all-gpus and --workers do not go together"},
      {"--workers 2", "--workers N starts model workers (with --backend model)"},
      {"--backend model --workers 2 --gpu 1", "--gpu is for cuda workers; model workers use no GPU"},
      {"--backend model --workers 0", "--workers needs a number in 1..256"},
      {"--backend model --workers two", "--workers needs a number in 1..256"},
      {"--all-gpus --compile-threads 0", "--compile-threads needs a number in 1..1024"},
      {"--all-gpus --name", "--name needs a name"},
  };
  for (const auto& c : cases) {
    auto plan = plan_host_workers(words(c.args), facts(8));
    EXPECT_EQ(plan.exit_status, 2) << c.args;
    EXPECT_NE(plan.error.find(c.says), std::string::npos) << c.args << ": " << plan.error;
    EXPECT_TRUE(plan.workers.empty()) << c.args;
  }
}

TEST(HostWorkersPlan, AllGpusWithoutAGpuPointsAtModelWorkers) {
  auto plan = plan_host_workers(words("--all-gpus"), facts(-1));
  EXPECT_EQ(plan.exit_status, 1);
  EXPECT_EQ(plan.error,
            "--all-gpus: no GPU found (CUDA driver version is insufficient for CUDA runtime version); use "
            "--backend model --workers N");
}

// --- the supervisor, with /bin/sh for workers ------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "evo-supervisor-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

SupervisedWorker sh(int k, const std::string& script) {
  return {"the worker on GPU " + std::to_string(k), "node7:gpu" + std::to_string(k), {"/bin/sh", "-c", script}};
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

bool wait_for_file(const std::string& path, int timeout_ms = 10000) {
  for (int t = 0; t < timeout_ms; t += 10) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Supervisor, AllCleanExitsGiveZero) {
  EXPECT_EQ(supervise({sh(0, "exit 0"), sh(1, "exit 0")}), 0);
}

TEST(Supervisor, OneFailingWorkerDoesNotTakeTheOthersAndIsNamedNotRestarted) {
  TempDir dir;
  const std::string starts = dir.file("starts"), survivor = dir.file("survivor");
  testing::internal::CaptureStderr();
  const int rc = supervise({sh(0, "sleep 0.5; echo done > " + survivor), sh(1, "echo start >> " + starts + "; exit 3")});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(err, "evo-worker: the worker on GPU 1 (node7:gpu1) exited with status 3\n");
  EXPECT_TRUE(fs::exists(survivor)) << "GPU 0's worker was stopped when GPU 1's failed";
  EXPECT_EQ(count_lines(starts), 1) << "the failed worker was started again";
}

TEST(Supervisor, AWorkerKilledByASignalNobodyForwardedFailed) {
  testing::internal::CaptureStderr();
  const int rc = supervise({sh(0, "exit 0"), sh(5, "kill -9 $$")});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("the worker on GPU 5 (node7:gpu5) was killed by signal 9"), std::string::npos) << err;
  EXPECT_EQ(err.find("GPU 0"), std::string::npos) << err;
}

TEST(Supervisor, AProgramThatCannotBeExecutedIsNamed) {
  testing::internal::CaptureStderr();
  const int rc = supervise({{"the worker on GPU 0", "node7:gpu0", {"/nonexistent/evo-worker", "--gpu", "0"}}, sh(1, "exit 0")});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("the worker on GPU 0 (node7:gpu0) did not start: cannot execute /nonexistent/evo-worker: No "
                     "such file or directory"),
            std::string::npos)
      << err;
}

// SIGTERM and SIGINT sent to the parent reach every worker; workers that stop as told (status 0,
// or killed by that very signal) make a clean exit.
void expect_forwarded(int sig) {
  TempDir dir;
  // The sender thread inherits this mask, so the signal waits for the supervisor's sigwaitinfo.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const std::string trapped = dir.file("trapped");
  std::thread sender([&] {
    ASSERT_TRUE(wait_for_file(dir.file("ready0")));
    ASSERT_TRUE(wait_for_file(dir.file("ready1")));
    kill(getpid(), sig);
  });
  // Worker 0 catches the signal and exits 0; worker 1 dies of it.
  const int rc = supervise(
      {sh(0, "trap 'echo got > " + trapped + "; exit 0' TERM INT; touch " + dir.file("ready0") +
                 "; while :; do sleep 0.05; done"),
       sh(1, "touch " + dir.file("ready1") + "; exec sleep 60")});
  sender.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(fs::exists(trapped)) << "the signal did not reach worker 0";
}

TEST(Supervisor, ForwardsSigtermToEveryWorker) { expect_forwarded(SIGTERM); }
TEST(Supervisor, ForwardsSigintToEveryWorker) { expect_forwarded(SIGINT); }

TEST(Supervisor, DescribesExits) {
  EXPECT_EQ(describe_exit(3 << 8), "exited with status 3");
  EXPECT_EQ(describe_exit(SIGKILL), "was killed by signal 9 (Killed)");
}

// --- evo-worker itself ------------------------------------------------------------------------

// evo-worker ARGS as a child process, its stdout and stderr in one file.
class WorkerProcess {
 public:
  explicit WorkerProcess(const std::vector<std::string>& args) : log_(dir_.file("log")) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      setenv("EVO_CACHE_DIR", dir_.file("cache").c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(EVO_WORKER_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~WorkerProcess() {
    if (!exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Exit status, 128 + signal, or -1 after timeout_ms.
  int wait(int timeout_ms = 30000) {
    for (int t = 0; t <= timeout_ms; t += 20) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // The pids of the workers it started, by name, once `count` have started (empty on timeout).
  std::vector<std::pair<std::string, pid_t>> started(size_t count, int timeout_ms = 30000) {
    static const std::regex kStarted(R"(event=worker_started name=(\S+) pid=(\d+))");
    for (int t = 0; t <= timeout_ms; t += 20) {
      std::vector<std::pair<std::string, pid_t>> out;
      const std::string text = log();
      for (std::sregex_iterator it(text.begin(), text.end(), kStarted), end; it != end; ++it)
        out.emplace_back((*it)[1], static_cast<pid_t>(std::stol((*it)[2])));
      if (out.size() >= count) return out;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
  }

 private:
  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  // Absent, or a zombie its new parent has not reaped yet.
  const auto close = text.rfind(')');
  return text.empty() || (close != std::string::npos && text.compare(close, 4, ") Z ") == 0);
}

bool eventually_gone(pid_t pid, int timeout_ms = 20000) {
  for (int t = 0; t <= timeout_ms; t += 20) {
    if (gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

TEST(EvoWorkerAllGpus, WithoutAGpuSaysSoInOneLine) {
  try {
    visible_gpu_count();
    GTEST_SKIP() << "a GPU is visible: --all-gpus would start workers";
  } catch (const std::runtime_error&) {
  }
  WorkerProcess w({"--all-gpus", "--coordinator", "127.0.0.1:1"});
  EXPECT_EQ(w.wait(), 1);
  const std::string log = w.log();
  EXPECT_NE(log.find("evo-worker: --all-gpus: no GPU found ("), std::string::npos) << log;
  EXPECT_NE(log.find("use --backend model --workers N\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("worker_started"), std::string::npos) << log;
}

TEST(EvoWorkerWorkers, AWorkersBadOptionIsSaidOnceAndNothingStarts) {
  WorkerProcess w({"--backend", "model", "--workers", "3", "--max-inflight", "0"});
  EXPECT_EQ(w.wait(), 2);
  const std::string log = w.log();
  EXPECT_EQ(log, "evo-worker: --max-inflight needs a number in 1..64\n(see evo-worker --help)\n");
}

// Model workers against an address nobody answers (each keeps retrying its registration): one
// killed does not stop the other; SIGTERM stops the rest; the exit status and line name the killed one.
TEST(EvoWorkerWorkers, OneKilledIsNamedTheOtherStopsCleanly) {
  WorkerProcess w({"--backend", "model", "--workers", "2", "--coordinator", "127.0.0.1:1"});
  auto workers = w.started(2);
  ASSERT_EQ(workers.size(), 2u) << w.log();
  const std::string host = host_name();
  EXPECT_EQ(workers[0].first, host + ":model0");
  EXPECT_EQ(workers[1].first, host + ":model1");
  kill(workers[1].second, SIGKILL);
  ASSERT_TRUE(eventually_gone(workers[1].second));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(gone(workers[0].second)) << "model worker 0 stopped when model worker 1 was killed";
  EXPECT_FALSE(gone(w.pid())) << w.log();
  kill(w.pid(), SIGTERM);
  EXPECT_EQ(w.wait(), 1) << w.log();
  const std::string log = w.log();
  EXPECT_NE(log.find("evo-worker: model worker 1 (" + host + ":model1) was killed by signal 9"), std::string::npos)
      << log;
  EXPECT_NE(log.find("event=worker_exited name=" + host + ":model0"), std::string::npos) << log;
  // Each worker's lines carry its name; each sized its compile pool as told.
  EXPECT_NE(log.find("evo-worker[" + host + ":model0] "), std::string::npos) << log;
  EXPECT_NE(log.find("event=compile_pool threads="), std::string::npos) << log;
}

TEST(EvoWorkerCompileThreads, ALoneWorkerRefusesZeroAndSizesItsPoolByDefault) {
  WorkerProcess bad({"--backend", "model", "--compile-threads", "0"});
  EXPECT_EQ(bad.wait(), 2);
  EXPECT_NE(bad.log().find("evo-worker: --compile-threads needs a number in 1..1024"), std::string::npos)
      << bad.log();

  WorkerProcess w({"--backend", "model", "--coordinator", "127.0.0.1:1"});
  const std::string want = "event=compile_pool threads=" + std::to_string(host_cores()) +
                           " host_cores=" + std::to_string(host_cores()) + " workers_on_host=1 from=default";
  bool seen = false;
  for (int t = 0; t < 30000 && !seen; t += 20) {
    seen = w.log().find(want) != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(seen) << w.log();
  kill(w.pid(), SIGTERM);
  EXPECT_EQ(w.wait(), 0) << w.log();
}

TEST(EvoWorkerWorkers, AKilledParentLeavesNoWorkerBehind) {
  WorkerProcess w({"--backend", "model", "--workers", "2", "--coordinator", "127.0.0.1:1", "--compile-threads", "1"});
  auto workers = w.started(2);
  ASSERT_EQ(workers.size(), 2u) << w.log();
  kill(w.pid(), SIGKILL);
  EXPECT_EQ(w.wait(), 128 + SIGKILL);
  for (const auto& [name, pid] : workers) EXPECT_TRUE(eventually_gone(pid)) << name << " outlived its parent";
}

}  // namespace
}  // namespace evo
