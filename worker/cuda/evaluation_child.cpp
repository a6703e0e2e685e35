#include "evaluation_child.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace evo::cuda {
namespace {

// The child's last non-empty log line: the most specific thing it said before it died.
std::string last_line(const std::string& log) {
  std::istringstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

}  // namespace

std::string write_request(EvalRequest& req, const ChildLaunch& how, std::string* request_path) {
  const std::string base = how.work_dir + "/" + how.tag;
  req.result_path = base + ".result.pb";
  *request_path = base + ".request.json";
  std::remove(req.result_path.c_str());
  std::ofstream f(*request_path, std::ios::trunc);
  f << to_json(req);
  return f.flush() ? "" : "cannot write the evaluation request '" + *request_path + "'";
}

ChildOutcome outcome_of(const ChildExit& exit, const std::string& result_path, int timeout_ms) {
  ChildOutcome out;
  out.log = exit.stderr_tail;
  out.wall_ms = exit.wall_ms;
  out.exit_code = exit.timed_out || exit.signaled ? -1 : exit.exit_code;
  auto& e = out.evaluation;
  if (exit.timed_out) {
    e.set_status(v1::TIMEOUT);
    e.set_message("timeout: no result after " + std::to_string(timeout_ms) + " ms");
    return out;
  }
  {
    std::ifstream f(result_path, std::ios::binary);
    if (f && e.ParseFromIstream(&f)) out.result_written = true;
  }
  if (exit.signaled) {
    // Whatever the child wrote before it died does not outrank the death.
    e.set_status(v1::CRASH);
    const std::string said = last_line(exit.stderr_tail);
    e.set_message("crash: child killed by " + signal_name(exit.signal) +
                  (said.empty() ? "" : " (last words: " + said + ")"));
    return out;
  }
  if (!out.result_written) {
    e.Clear();
    e.set_status(v1::CRASH);
    const std::string said = last_line(exit.stderr_tail);
    e.set_message("crash: child exited with code " + std::to_string(exit.exit_code) +
                  " and no result" + (said.empty() ? "" : ": " + said));
  }
  return out;
}

ChildOutcome run_evaluation_child(EvalRequest req, const ChildLaunch& how) {
  std::string request_path;
  if (const std::string why = write_request(req, how, &request_path); !why.empty()) {
    ChildOutcome out;
    out.evaluation.set_status(v1::CRASH);
    out.evaluation.set_message(why);
    return out;
  }
  std::vector<std::string> argv = how.wrapper;
  argv.push_back(how.exe);
  argv.push_back("__child");
  argv.push_back(request_path);
  ChildExit exit;
  try {
    exit = run_child(argv, how.timeout_ms, how.work_dir + "/" + how.tag + ".log");
  } catch (const std::exception& e) {
    ChildOutcome out;
    out.evaluation.set_status(v1::CRASH);
    out.evaluation.set_message(e.what());
    return out;
  }
  return outcome_of(exit, req.result_path, how.timeout_ms);
}

}  // namespace evo::cuda
