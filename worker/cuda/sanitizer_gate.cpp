#include "sanitizer_gate.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "evaluation_child.h"
#include "wire_labels.h"
#include "gate_math.h"
#include "log_ids.h"

namespace evo::cuda {
namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string join_labels(const std::vector<ShapeJob>& jobs) {
  std::string s;
  for (const auto& j : jobs) s += (s.empty() ? "" : ", ") + j.shape.text();
  return s;
}

}  // namespace

std::string find_compute_sanitizer() {
  if (const char* env = std::getenv("EVO_COMPUTE_SANITIZER"); env && executable(env)) return env;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && executable(dir + "/compute-sanitizer")) return dir + "/compute-sanitizer";
  }
  const char* home = std::getenv("CUDA_HOME");
  const std::string root = home && *home ? home : "/usr/local/cuda";
  for (const std::string& candidate :
       {root + "/bin/compute-sanitizer", root + "/compute-sanitizer/compute-sanitizer"})
    if (executable(candidate)) return candidate;
  return {};
}

int sanitizer_jobs() {
  const int all = static_cast<int>(sanitizer_tools().size());
  const char* env = std::getenv("EVO_SANITIZER_JOBS");
  if (!env || !*env) return all;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(env, &end, 10);
  if (*end != '\0' || errno != 0 || n < 1)
    throw std::runtime_error(std::string("EVO_SANITIZER_JOBS must be a whole number from 1, got '") + env + "'");
  return static_cast<int>(std::min<long>(n, all));
}

const std::vector<std::string>& sanitizer_tools() {
  static const std::vector<std::string> tools = {"memcheck", "racecheck", "initcheck", "synccheck"};
  return tools;
}

std::string first_sanitizer_error(const std::string& log) {
  static const std::string prefix = "========= ";
  std::istringstream in(log);
  std::string line, first;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string rest = line.substr(prefix.size());
    if (!first.empty()) {
      // racecheck names a hazard's second access on the indented line after it ("and Write
      // access at ..."): without it the reader knows one side of the race only.
      const size_t text = rest.find_first_not_of(' ');
      if (text != std::string::npos && text > 0 && rest.compare(text, 4, "and ") == 0)
        first += " " + rest.substr(text);
      return first;
    }
    // Skip the banner, indented detail lines (stack frames, addresses) and the summary.
    if (rest.empty() || rest[0] == ' ' || rest.rfind("COMPUTE-SANITIZER", 0) == 0 ||
        rest.rfind("ERROR SUMMARY", 0) == 0 || rest.rfind("RACECHECK SUMMARY", 0) == 0)
      continue;
    first = rest;
  }
  return first;
}

SanitizerVerdict run_sanitizer_gate(const std::string& sanitizer, const std::string& exe,
                                    const EvalRequest& req, const std::string& work_dir,
                                    int timeout_ms) {
  SanitizerVerdict v;
  if (sanitizer.empty()) {
    set_gate_forms(v.gate, v1::GATE_SANITIZER, v1::VERDICT_SKIPPED);
    v.gate.set_detail("compute-sanitizer not found (set EVO_COMPUTE_SANITIZER or CUDA_HOME)");
    return v;
  }
  // One child per tool, a batch of sanitizer_jobs() at a time; every tool's outcome is kept so
  // that the verdict does not depend on which process finished first.
  const auto& tools = sanitizer_tools();
  std::vector<ChildOutcome> outcomes(tools.size());
  auto run_tool = [&](size_t i) {
    const std::string& tool = tools[i];
    ChildLaunch how;
    how.exe = exe;
    how.wrapper = {sanitizer, "--tool", tool, "--error-exitcode", std::to_string(kSanitizerErrorExit),
                   "--print-limit", "20"};
    // Buffers allocated back to back leave no gap: a write one element past the output would land
    // in the next buffer and look legal. memcheck's padding puts unowned bytes after each buffer.
    if (tool == "memcheck") how.wrapper.insert(how.wrapper.end(), {"--padding", "1024"});
    how.timeout_ms = timeout_ms;
    how.work_dir = work_dir;
    how.tag = "sanitizer-" + tool;
    outcomes[i] = run_evaluation_child(req, how);
  };
  const size_t jobs = static_cast<size_t>(sanitizer_jobs());
  for (size_t first = 0; first < tools.size(); first += jobs) {
    std::vector<std::thread> batch;
    for (size_t i = first; i < std::min(tools.size(), first + jobs); ++i) batch.emplace_back(run_tool, i);
    for (auto& t : batch) t.join();
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string& tool = tools[i];
    const ChildOutcome& o = outcomes[i];
    std::string problem;
    if (o.exit_code == kSanitizerErrorExit) {
      const std::string first = first_sanitizer_error(o.log);
      problem = first.empty() ? "reported errors (exit " + std::to_string(kSanitizerErrorExit) + ")" : first;
    } else if (o.evaluation.status() != v1::OK) {
      // Hung, crashed, or wrong under the tool: the candidate does not get in either way.
      const std::string first = first_sanitizer_error(o.log);
      problem = first.empty() ? o.evaluation.message() : first;
    }
    if (!problem.empty()) {
      // One process ran every shape under the tool, so the verdict names them all: the reader
      // can rerun those shapes (evo-worker eval --shape) under the tool to find the failing one.
      const std::string where = req.shapes.empty() ? tool : tool + " on " + join_labels(req.shapes);
      spdlog::warn("event=sanitizer_failed {}tool={} where=\"{}\" error=\"{}\"", log_ids(), tool, where, problem);
      v.failed = true;
      set_gate_forms(v.gate, v1::GATE_SANITIZER, v1::VERDICT_FAILED);
      v.gate.set_detail(where + ": " + problem);
      v.message = "sanitizer_error: " + where + ": " + problem;
      return v;
    }
    spdlog::debug("event=sanitizer_passed {}tool={} wall_ms={:.0f} dir={}", log_ids(), tool, o.wall_ms, work_dir);
  }
  set_gate_forms(v.gate, v1::GATE_SANITIZER, v1::VERDICT_PASSED);
  std::string names;
  for (const auto& t : tools) names += (names.empty() ? "" : ", ") + t;
  v.gate.set_detail(names + ": 0 errors on " + join_labels(req.shapes));
  return v;
}

}  // namespace evo::cuda
