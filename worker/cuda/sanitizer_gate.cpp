#include "sanitizer_gate.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "evaluation_child.h"
#include "gate_math.h"

namespace evo::cuda {
namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string join_labels(const std::vector<ShapeJob>& jobs) {
  std::string s;
  for (const auto& j : jobs) s += (s.empty() ? "" : ", ") + shape_label(j.shape);
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

const std::vector<std::string>& sanitizer_tools() {
  static const std::vector<std::string> tools = {"memcheck", "racecheck", "initcheck", "synccheck"};
  return tools;
}

std::string first_sanitizer_error(const std::string& log) {
  static const std::string prefix = "========= ";
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string rest = line.substr(prefix.size());
    // Skip the banner, indented detail lines (stack frames, addresses) and the summary.
    if (rest.empty() || rest[0] == ' ' || rest.rfind("COMPUTE-SANITIZER", 0) == 0 ||
        rest.rfind("ERROR SUMMARY", 0) == 0 || rest.rfind("RACECHECK SUMMARY", 0) == 0)
      continue;
    return rest;
  }
  return {};
}

SanitizerVerdict run_sanitizer_gate(const std::string& sanitizer, const std::string& exe,
                                    const EvalRequest& req, const std::string& work_dir,
                                    int timeout_ms) {
  SanitizerVerdict v;
  v.gate.set_gate("sanitizer");
  if (sanitizer.empty()) {
    v.gate.set_verdict("skipped");
    v.gate.set_detail("compute-sanitizer not found (set EVO_COMPUTE_SANITIZER or CUDA_HOME)");
    return v;
  }
  for (const auto& tool : sanitizer_tools()) {
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
    const ChildOutcome o = run_evaluation_child(req, how);
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
      spdlog::warn("sanitizer {} failed: {}", tool, problem);
      v.failed = true;
      v.gate.set_verdict("failed");
      v.gate.set_detail(tool + ": " + problem);
      v.message = "sanitizer_error: " + tool + ": " + problem;
      return v;
    }
    spdlog::debug("sanitizer {} passed in {}", tool, work_dir);
  }
  v.gate.set_verdict("passed");
  std::string tools;
  for (const auto& t : sanitizer_tools()) tools += (tools.empty() ? "" : ", ") + t;
  v.gate.set_detail(tools + ": 0 errors on " + join_labels(req.shapes));
  return v;
}

}  // namespace evo::cuda
