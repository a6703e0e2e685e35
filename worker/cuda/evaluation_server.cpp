#include "evaluation_server.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <cstring>

#include <spdlog/spdlog.h>

#include "child_process.h"

namespace evo::cuda {
namespace {

// A process that has answered this many requests is replaced: whatever a long life might
// accumulate (a leak of the driver's, fragmentation) stays bounded.
constexpr int kRequestsPerProcess = 200;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

ChildOutcome refused(const std::string& why) {
  ChildOutcome out;
  out.evaluation.set_status(v1::CRASH);
  out.evaluation.set_message(why);
  return out;
}

// Reads the child's answer line ("done <code>") until the deadline. Returns the code, or -1 at
// the deadline, -2 when the child closed its end (it died) or said something else.
int read_answer(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return -1;
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -2;
    line.append(buf, static_cast<size_t>(n));
    const size_t end = line.find('\n');
    if (end == std::string::npos) continue;
    if (line.rfind("done ", 0) != 0) return -2;
    return std::atoi(line.c_str() + 5);
  }
}

}  // namespace

EvaluationServer::EvaluationServer(std::string exe, std::string log_dir)
    : exe_(std::move(exe)), log_path_(std::move(log_dir) + "/evaluation-server.log") {
  // A write to a server that died must fail with EPIPE, not kill the worker.
  static const bool sigpipe_ignored = (std::signal(SIGPIPE, SIG_IGN), true);
  (void)sigpipe_ignored;
}

EvaluationServer::~EvaluationServer() {
  if (pid_ > 0) stop(true, nullptr);
}

void EvaluationServer::start() {
  pid_ = spawn_serving_child({exe_, "__child_server"}, log_path_, kServerAnswerFd, &requests_fd_, &answers_fd_);
  ++starts_;
  answered_ = 0;
  spdlog::debug("event=evaluation_server_started pid={} starts={}", pid_, starts_);
}

void EvaluationServer::stop(bool kill, ChildExit* exit) {
  ::close(requests_fd_);  // a live server reads the end of its requests and exits
  ::close(answers_fd_);
  const ChildExit ended = end_child(pid_, kill, log_path_);
  if (exit) *exit = ended;
  pid_ = requests_fd_ = answers_fd_ = -1;
}

ChildOutcome EvaluationServer::evaluate(EvalRequest req, const ChildLaunch& how) {
  std::string request_path;
  if (const std::string why = write_request(req, how, &request_path); !why.empty()) return refused(why);
  const auto started = std::chrono::steady_clock::now();
  if (pid_ < 0) {
    try {
      start();
    } catch (const std::exception& e) {
      return refused(e.what());
    }
  }
  ::truncate(log_path_.c_str(), 0);  // the log's tail is this request's
  const std::string line = request_path + "\n";
  bool sent = ::write(requests_fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (!sent) {
    // It died while idle (killed from outside): that is not this candidate's doing. Once more, on
    // a new process.
    stop(true, nullptr);
    try {
      start();
    } catch (const std::exception& e) {
      return refused(e.what());
    }
    sent = ::write(requests_fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  }
  ChildExit exit;
  const int code = sent ? read_answer(answers_fd_, started + std::chrono::milliseconds(how.timeout_ms)) : -2;
  if (code == -1) {
    stop(true, &exit);  // the watchdog: the whole group, the kernel still on the GPU with it
    exit.timed_out = true;
  } else if (code == -2) {
    stop(true, &exit);  // it died during the request (or broke the protocol): its exit says how
  } else {
    exit.exit_code = code;
    exit.stderr_tail = log_tail(log_path_);
  }
  exit.wall_ms = ms_since(started);
  ChildOutcome out = outcome_of(exit, req.result_path, how.timeout_ms);
  // The server ends itself after any answer but a passing one (child_main.h): reap it now, so
  // that the next request starts a new one rather than writing to one on its way out.
  if (pid_ > 0 && (code != 0 || out.evaluation.status() != v1::OK || ++answered_ >= kRequestsPerProcess))
    stop(false, nullptr);
  return out;
}

}  // namespace evo::cuda
