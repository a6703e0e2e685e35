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

namespace {

// Starts argv[0] in its own process group, so that the watchdog also kills whatever the child
// started (compute-sanitizer runs the target as a grandchild), with the default signal dispositions
// and mask (a parent may ignore or block signals: a daemon). Throws when it cannot start.
pid_t spawn_in_own_group(const std::vector<std::string>& argv, posix_spawn_file_actions_t* actions) {
  if (argv.empty()) throw std::runtime_error("run_child: empty command");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], actions, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start child '" + argv[0] + "': " + std::strerror(rc));
  return pid;
}

// The exit of a child that waitpid reported as status.
void read_status(int status, ChildExit* out) {
  if (WIFSIGNALED(status)) {
    out->signaled = true;
    out->signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    out->exit_code = WEXITSTATUS(status);
  }
}

}  // namespace

ChildExit run_child(const std::vector<std::string>& argv, int timeout_ms, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  try {
    pid = spawn_in_own_group(argv, &actions);
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);

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
  if (!out.timed_out) read_status(status, &out);
  out.stderr_tail = read_tail(log_path, kStderrTailBytes);
  return out;
}

pid_t spawn_serving_child(const std::vector<std::string>& argv, const std::string& log_path, int answer_fd,
                          int* requests_fd, int* answers_fd) {
  int requests[2], answers[2];
  if (pipe2(requests, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(answers, O_CLOEXEC) != 0) {
    close(requests[0]);
    close(requests[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, requests[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, answers[1], answer_fd);
  // O_APPEND: the parent truncates the log before each request, and the child writes at its end.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  try {
    pid = spawn_in_own_group(argv, &actions);
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    for (int fd : {requests[0], requests[1], answers[0], answers[1]}) close(fd);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(requests[0]);
  close(answers[1]);
  *requests_fd = requests[1];
  *answers_fd = answers[0];
  return pid;
}

ChildExit end_child(pid_t pid, bool kill_group, const std::string& log_path) {
  ChildExit out;
  if (kill_group) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  kill(-pid, SIGKILL);  // stragglers of the group
  read_status(status, &out);
  out.stderr_tail = read_tail(log_path, kStderrTailBytes);
  return out;
}

std::string log_tail(const std::string& log_path) { return read_tail(log_path, kStderrTailBytes); }

}  // namespace evo::cuda
