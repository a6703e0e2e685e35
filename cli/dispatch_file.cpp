#include "dispatch_file.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "attention/problem.h"
#include "errors.h"

namespace evo::cli {

DispatchFile dispatch_file(const v1::ExportResponse& response, const std::string& cu_name) {
  DispatchFile out;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& bucket : response.buckets()) {
    for (const auto& text : bucket.shapes()) {
      attention::Shape s;
      try {
        s = attention::parse_shape(text);
      } catch (const InputError& e) {
        throw std::invalid_argument(std::string("evod sent a malformed bucket shape: ") + e.what());
      }
      if (s.seq_q != s.seq_k) {
        // The bench builds q, k, v of one sequence length; such a bucket still serves calls.
        out.skipped.push_back(text + " (seq_q != seq_k: the bench runs equal lengths only)");
        continue;
      }
      const std::string dims = std::to_string(s.batch) + "x" + std::to_string(s.heads) + "x" +
                               std::to_string(s.seq_q) + "x" + std::to_string(s.head_dim);
      entries.push_back({{"shape", dims},
                         {"causal", s.causal},
                         {"dtype", std::string(attention::dtype_name(s.dtype))},
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
