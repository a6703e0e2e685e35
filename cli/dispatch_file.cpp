#include "dispatch_file.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace evo::cli {
namespace {

struct BenchShape {
  std::vector<std::string> dims;  // as written: B, H, Sq[, Sk], D
  bool causal = false;
};

BenchShape split_shape(const std::string& text) {
  BenchShape s;
  std::string dims = text;
  const size_t colon = text.find(':');
  if (colon != std::string::npos) {
    if (text.substr(colon + 1) != "causal") throw std::invalid_argument("evod sent a malformed bucket shape '" + text + "'");
    s.causal = true;
    dims = text.substr(0, colon);
  }
  size_t start = 0;
  while (true) {
    const size_t x = dims.find('x', start);
    s.dims.push_back(dims.substr(start, x == std::string::npos ? std::string::npos : x - start));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  for (const auto& d : s.dims)
    if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("evod sent a malformed bucket shape '" + text + "'");
  if (s.dims.size() != 4 && s.dims.size() != 5)
    throw std::invalid_argument("evod sent a malformed bucket shape '" + text + "'");
  return s;
}

}  // namespace

DispatchFile dispatch_file(const v1::ExportResponse& response, const std::string& cu_name) {
  DispatchFile out;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& bucket : response.buckets()) {
    for (const auto& text : bucket.shapes()) {
      BenchShape s = split_shape(text);
      if (s.dims.size() == 5) {
        if (s.dims[2] != s.dims[3]) {
          // The bench builds q, k, v of one sequence length; such a bucket still serves calls.
          out.skipped.push_back(text + " (seq_q != seq_k: the bench runs equal lengths only)");
          continue;
        }
        s.dims.erase(s.dims.begin() + 3);
      }
      entries.push_back({{"shape", s.dims[0] + "x" + s.dims[1] + "x" + s.dims[2] + "x" + s.dims[3]},
                         {"causal", s.causal},
                         {"genome", bucket.genome()},
                         {"run_id", bucket.run_id()},
                         {"estimated", bucket.estimated()},
                         {"cu", cu_name}});
    }
  }
  out.json = nlohmann::json{{"shapes", entries}}.dump(2) + "\n";
  return out;
}

std::string cu_stem(const std::string& cu_path) {
  const std::string ext = ".cu";
  if (cu_path.size() > ext.size() && cu_path.compare(cu_path.size() - ext.size(), ext.size(), ext) == 0)
    return cu_path.substr(0, cu_path.size() - ext.size());
  return cu_path;
}

std::string dispatch_path(const std::string& cu_path) { return cu_stem(cu_path) + ".dispatch.json"; }

}  // namespace evo::cli
