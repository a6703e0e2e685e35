#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace evo::cuda {
namespace {

constexpr size_t kStderrTailBytes = 8192;

std::string read_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  in.seekg(start);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "signal " + std::to_string(sig);
  }
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error(std::string("cannot resolve /proc/self/exe: ") + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

ChildExit run_child(const std::vector<std::string>& argv, int timeout_ms, const std::string& log_path) {
  if (argv.empty()) throw std::runtime_error("run_child: empty command");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that the watchdog also kills whatever the child started
  // (compute-sanitizer runs the target as a grandchild).
  posix_spawnattr_setpgroup(&attr, 0);
  // A parent may ignore or block signals (a daemon); the child starts with the defaults.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("cannot start child '" + argv[0] + "': " + std::strerror(rc));

  ChildExit out;
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  auto poll = std::chrono::microseconds(200);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      out.exit_code = -1;
      out.stderr_tail = std::string("waitpid failed: ") + std::strerror(errno);
      return out;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);  // the whole group: the child and anything it started
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      out.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(poll);
    if (poll < std::chrono::milliseconds(5)) poll *= 2;  // quick children answer quickly
  }
  // Reap stragglers of the group (a sanitizer's target left behind when the wrapper exited).
  kill(-pid, SIGKILL);
  out.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!out.timed_out) {
    if (WIFSIGNALED(status)) {
      out.signaled = true;
      out.signal = WTERMSIG(status);
    } else if (WIFEXITED(status)) {
      out.exit_code = WEXITSTATUS(status);
    }
  }
  out.stderr_tail = read_tail(log_path, kStderrTailBytes);
  return out;
}

}  // namespace evo::cuda
