#include "evaluation_child.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "child_process.h"

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

ChildOutcome run_evaluation_child(EvalRequest req, const ChildLaunch& how) {
  ChildOutcome out;
  const std::string base = how.work_dir + "/" + how.tag;
  req.result_path = base + ".result.pb";
  const std::string request_path = base + ".request.json";
  std::remove(req.result_path.c_str());
  {
    std::ofstream f(request_path, std::ios::trunc);
    f << to_json(req);
    if (!f.flush()) {
      out.evaluation.set_status(v1::CRASH);
      out.evaluation.set_message("cannot write the evaluation request '" + request_path + "'");
      return out;
    }
  }
  std::vector<std::string> argv = how.wrapper;
  argv.push_back(how.exe);
  argv.push_back("__child");
  argv.push_back(request_path);

  ChildExit exit;
  try {
    exit = run_child(argv, how.timeout_ms, base + ".log");
  } catch (const std::exception& e) {
    out.evaluation.set_status(v1::CRASH);
    out.evaluation.set_message(e.what());
    return out;
  }
  out.log = exit.stderr_tail;
  out.wall_ms = exit.wall_ms;
  out.exit_code = exit.timed_out || exit.signaled ? -1 : exit.exit_code;
  auto& e = out.evaluation;
  if (exit.timed_out) {
    e.set_status(v1::TIMEOUT);
    e.set_message("timeout: no result after " + std::to_string(how.timeout_ms) + " ms");
    return out;
  }
  {
    std::ifstream f(req.result_path, std::ios::binary);
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

}  // namespace evo::cuda
