#include "ptxas_report.h"

#include <regex>
#include <sstream>
#include <vector>

namespace evo {
namespace {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// First integer captured by `re` in `line`, if it matches.
std::optional<int> capture_int(const std::string& line, const std::regex& re) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return std::nullopt;
  return std::stoi(m[1].str());
}

}  // namespace

std::optional<v1::ResourceReport> parse_ptxas_report(std::string_view log,
                                                     std::string_view lowered_name) {
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kProperties(R"(Function properties for (\S+))");
  static const std::regex kRegisters(R"(Used (\d+) registers)");
  static const std::regex kStack(R"((\d+) bytes stack frame)");
  static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
  static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
  static const std::regex kSmem(R"((\d+) bytes smem)");

  const std::vector<std::string> lines = split_lines(log);
  v1::ResourceReport report;
  std::string own_lines;
  bool found = false;
  // Which function the current line is about: ptxas announces the entry ("Compiling entry
  // function"), then its properties ("Function properties for"); non-inlined device functions
  // get properties blocks of their own, which must not be read as the kernel's.
  bool in_entry = false, in_properties = false;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      in_entry = m[1].str() == lowered_name;
      in_properties = false;
    } else if (std::regex_search(line, m, kProperties)) {
      in_properties = m[1].str() == lowered_name;
    } else if (line.find("Compile time") != std::string::npos) {
      // Each entry's block ends with its compile time.
      if (in_entry) own_lines += line + "\n";
      in_entry = in_properties = false;
      continue;
    }
    if (!in_entry && !in_properties) continue;
    own_lines += line + "\n";
    if (in_properties) {
      if (auto v = capture_int(line, kStack)) report.set_stack_frame_bytes(*v), found = true;
      if (auto v = capture_int(line, kSpillStores)) report.set_spill_store_bytes(*v);
      if (auto v = capture_int(line, kSpillLoads)) report.set_spill_load_bytes(*v);
    }
    if (in_entry) {
      if (auto v = capture_int(line, kRegisters)) {
        report.set_registers(*v);
        found = true;
        if (auto s = capture_int(line, kSmem)) report.set_static_smem_bytes(*s);
      }
    }
  }
  if (!found) return std::nullopt;
  report.set_ptxas_log(own_lines);
  return report;
}

std::optional<std::string> register_allocation_failure(std::string_view log) {
  static constexpr std::string_view kWhat = "Register allocation failed";
  const size_t at = log.find(kWhat);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t end = log.find_first_of("\r\n", at);
  std::string line(log.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
  // "... Compile the program with a higher register target": advice for nvcc, not for a genome.
  if (const size_t dot = line.find(". "); dot != std::string::npos) line.erase(dot);
  return line;
}

}  // namespace evo
