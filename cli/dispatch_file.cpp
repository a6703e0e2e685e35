#include "dispatch_file.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "errors.h"
#include "family.h"
#include "search_space.h"

namespace evo::cli {

namespace {

// The family of the bucket's kernel: its typed genome's, or the prefix of its text from an evod
// that predates typed genomes.
const KernelFamily& family_of(const v1::ExportBucket& bucket) {
  std::string kernel = bucket.typed_genome().kernel();
  if (kernel.empty()) kernel = bucket.genome().substr(0, bucket.genome().find(':'));
  try {
    return SearchSpace::for_template(kernel).family();
  } catch (const InputError& e) {
    throw std::invalid_argument(std::string("evod exported a kernel this evoctl does not know: ") + e.what());
  }
}

}  // namespace

DispatchFile dispatch_file(const v1::ExportResponse& response, const std::string& cu_name) {
  DispatchFile out;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& bucket : response.buckets()) {
    const KernelFamily& family = family_of(bucket);
    for (const auto& text : bucket.shapes()) {
      std::string fields, why_not;
      try {
        fields = family.export_entry().bench_fields(family.parse(text, {}), &why_not);
      } catch (const InputError& e) {
        throw std::invalid_argument(std::string("evod sent a malformed bucket shape: ") + e.what());
      }
      if (fields.empty()) {
        // The family's bench cannot run it; the exported table still serves such calls.
        out.skipped.push_back(text + " (" + why_not + ")");
        continue;
      }
      nlohmann::json entry = nlohmann::json::parse(fields);
      entry["genome"] = bucket.genome();
      entry["run_id"] = bucket.run_id();
      entry["estimated"] = bucket.estimated();
      entry["cu"] = cu_name;
      entries.push_back(std::move(entry));
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
