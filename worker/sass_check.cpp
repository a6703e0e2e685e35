#include "sass_check.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

namespace evo {
namespace fs = std::filesystem;
namespace {

bool is_executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Single-quotes a path for /bin/sh.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::optional<std::string> find_cuobjdump() {
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && is_executable(fs::path(dir) / "cuobjdump"))
        return (fs::path(dir) / "cuobjdump").string();
  }
  const char* home = std::getenv("CUDA_HOME");
  const fs::path candidate = fs::path(home && *home ? home : "/usr/local/cuda") / "bin" / "cuobjdump";
  if (is_executable(candidate)) return candidate.string();
  return std::nullopt;
}

std::optional<TensorCoreOps> count_tensor_core_ops(std::string_view sass_listing, std::string_view lowered_name) {
  static const std::regex kFunction(R"(Function\s*:\s*(\S+))");
  static const std::regex kTensorOp(R"(\b(HMMA|HGMMA|QGMMA)\b)");
  std::istringstream in{std::string(sass_listing)};
  bool inside = false, found = false;
  TensorCoreOps ops;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kFunction)) {
      inside = m[1].str() == lowered_name;
      found = found || inside;
      continue;
    }
    if (inside && std::regex_search(line, m, kTensorOp)) ++ops[m[1].str()];
  }
  if (!found) return std::nullopt;
  return ops;
}

int total_ops(const TensorCoreOps& ops) {
  int n = 0;
  for (const auto& [name, count] : ops) n += count;
  return n;
}

std::string missing_instruction(const TensorCoreOps& ops, std::string_view required) {
  if (required.empty() || ops.count(std::string(required)) > 0) return "";
  std::string found;
  for (const auto& [name, count] : ops) found += (found.empty() ? "" : ", ") + std::to_string(count) + " " + name;
  return "no " + std::string(required) + " instruction in the SASS, which this problem's dtype needs (found " +
         (found.empty() ? "none" : found) + ")";
}

SassVerdict check_tensor_core_sass(const std::string& cubin_path, const std::string& lowered_name) {
  const auto tool = find_cuobjdump();
  if (!tool) return {v1::VERDICT_SKIPPED, "cuobjdump not found in PATH or $CUDA_HOME/bin", {}};
  const std::string cmd = shell_quote(*tool) + " --dump-sass " + shell_quote(cubin_path) + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return {v1::VERDICT_SKIPPED, "cannot run cuobjdump", {}};
  std::string listing;
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;) listing.append(buf.data(), n);
  const int status = ::pclose(pipe);
  if (status != 0 || listing.empty()) {
    spdlog::warn("event=cuobjdump_failed cubin={} status={}", cubin_path, status);
    return {v1::VERDICT_SKIPPED, "cuobjdump failed on the cubin", {}};
  }
  const auto ops = count_tensor_core_ops(listing, lowered_name);
  if (!ops) return {v1::VERDICT_FAILED, "kernel " + lowered_name + " not found in the SASS listing", {}};
  if (ops->empty()) return {v1::VERDICT_FAILED, "no HMMA/HGMMA/QGMMA instruction in the SASS: tensor cores unused", {}};
  std::string names;
  for (const auto& [name, count] : *ops) names += (names.empty() ? "" : "/") + name;
  return {v1::VERDICT_PASSED, std::to_string(total_ops(*ops)) + " " + names + " instructions in the SASS", *ops};
}

}  // namespace evo
