#include "supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include <spdlog/spdlog.h>

namespace evo {

namespace {

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGKILL: return "SIGKILL";
    default: return "signal";
  }
}

// Forks and executes w.argv with the caller's signal mask (`mask`). Returns the child's pid, or -1
// with *error set when the fork or the exec failed (the exec's errno comes back through a pipe
// that the exec closes).
pid_t spawn(const SupervisedWorker& w, const sigset_t& mask, std::string* error) {
  std::vector<char*> args;
  for (const auto& a : w.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    *error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("cannot fork: ") + std::strerror(errno);
    close(report[0]);
    close(report[1]);
    return -1;
  }
  if (pid == 0) {  // only async-signal-safe calls from here to the exec
    close(report[0]);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the parent died before the line above
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    execv(args[0], args.data());
    const int err = errno;
    (void)!write(report[1], &err, sizeof err);
    _exit(127);
  }
  close(report[1]);
  int err = 0;
  ssize_t n;
  do n = read(report[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    waitpid(pid, nullptr, 0);
    *error = "cannot execute " + w.argv[0] + ": " + std::strerror(err);
    return -1;
  }
  return pid;
}

}  // namespace

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

int supervise(const std::vector<SupervisedWorker>& workers) {
  sigset_t watched, caller_mask;
  sigemptyset(&watched);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &watched, &caller_mask);

  std::vector<std::string> failures;
  std::map<pid_t, const SupervisedWorker*> live;
  for (const auto& w : workers) {
    std::string error;
    const pid_t pid = spawn(w, caller_mask, &error);
    if (pid < 0) {
      spdlog::error("event=worker_not_started name={} error=\"{}\"", w.name, error);
      failures.push_back(w.label + " (" + w.name + ") did not start: " + error);
      continue;
    }
    spdlog::info("event=worker_started name={} pid={}", w.name, pid);
    live[pid] = &w;
  }

  bool stopping = false;
  while (!live.empty()) {
    const int sig = sigwaitinfo(&watched, nullptr);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("event=stopping signal={} workers={} (forwarded to each)", signal_name(sig), live.size());
      stopping = true;
      for (const auto& [pid, w] : live) kill(pid, sig);
      continue;
    }
    if (sig != SIGCHLD) continue;  // interrupted
    for (auto it = live.begin(); it != live.end();) {
      int status = 0;
      if (waitpid(it->first, &status, WNOHANG) != it->first) {
        ++it;
        continue;
      }
      const SupervisedWorker& w = *it->second;
      // A worker stops with status 0 when told to; one killed by the signal forwarded to it
      // (a program that does not catch it) stopped as told too.
      const bool told = stopping && WIFSIGNALED(status) &&
                        (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT);
      const bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) || told;
      const std::string how = describe_exit(status);
      if (clean) {
        spdlog::info("event=worker_exited name={} pid={} how=\"{}\"", w.name, it->first, how);
      } else {
        spdlog::error("event=worker_failed name={} pid={} how=\"{}\" live_workers={} (not restarted)", w.name,
                      it->first, how, live.size() - 1);
        failures.push_back(w.label + " (" + w.name + ") " + how);
      }
      it = live.erase(it);
    }
  }
  pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  for (const auto& f : failures) std::fprintf(stderr, "evo-worker: %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace evo
