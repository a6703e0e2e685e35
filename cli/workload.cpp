#include "workload.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "errors.h"
#include "family.h"
#include "search_space.h"
#include "template_registry.h"

namespace evo::cli {
namespace {

using nlohmann::json;

const std::set<std::string> kFields = {"name", "seed", "dtype", "causal", "shapes"};
const std::set<std::string> kShapeFields = {"shape", "weight", "starts"};

struct Reader {
  std::string path;
  [[noreturn]] void fail(const std::string& why) const { throw InputError("workload " + path + ": " + why); }

  json document() const {
    std::ifstream in(path);
    if (!in) fail("cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    try {
      return json::parse(text.str());
    } catch (const json::parse_error& e) {
      fail(std::string("is not JSON (") + e.what() + ")");
    }
  }

  void only_known(const json& object, const std::set<std::string>& known, const std::string& where) const {
    for (const auto& [key, value] : object.items())
      if (!known.count(key)) fail("unknown field '" + key + "'" + where);
  }

  std::string text_field(const json& doc, const char* name) const {
    if (!doc.contains(name)) return "";
    if (!doc[name].is_string() || doc[name].get<std::string>().empty()) fail(std::string(name) + " must be a non-empty string");
    return doc[name].get<std::string>();
  }
};

// The file's defaults for shapes without a suffix, as the seed's family reads them from a submit.
ProblemDefaults defaults_of(const Reader& r, const KernelFamily& family, const json& doc) {
  v1::SubmitRunRequest defaults;
  if (doc.contains("causal")) {
    if (!doc["causal"].is_boolean()) r.fail("causal must be true or false");
    defaults.set_causal(doc["causal"].get<bool>());
  }
  if (const std::string dtype = r.text_field(doc, "dtype"); !dtype.empty()) {
    // The family's own label for it, the same as a space's "serves" list takes.
    try {
      defaults.set_dtype(static_cast<v1::DType>(family.value_of_label("DTYPE", dtype)));
    } catch (const InputError& e) {
      r.fail(std::string("dtype: ") + e.what());
    }
  }
  return family.submit_defaults(defaults);
}

struct Planned {
  Problem problem;
  WorkloadShape shape;
};

// A shape's "starts": genome texts of the seed's space, each read once here.
std::vector<Genome> read_starts(const Reader& r, const SearchSpace& space, const json& entry, const std::string& shape) {
  std::vector<Genome> out;
  if (!entry.contains("starts")) return out;
  const json& starts = entry["starts"];
  if (!starts.is_array()) r.fail("starts of '" + shape + "' must be a list of genome texts");
  for (const auto& s : starts) {
    if (!s.is_string() || s.get<std::string>().empty())
      r.fail("starts of '" + shape + "' must be a list of genome texts");
    try {
      out.push_back(space.parse(s.get<std::string>()));
    } catch (const InputError& e) {
      r.fail("start '" + s.get<std::string>() + "' of '" + shape + "': " + e.what());
    }
  }
  return out;
}

std::vector<Planned> read_shapes(const Reader& r, const SearchSpace& space, const json& doc) {
  const KernelFamily& family = space.family();
  if (!doc.contains("shapes") || !doc["shapes"].is_array() || doc["shapes"].empty())
    r.fail("'shapes' must be a non-empty list of {\"shape\": ..., \"weight\": ...}");
  const ProblemDefaults defaults = defaults_of(r, family, doc);
  std::vector<Planned> out;
  std::set<std::string> seen;
  for (const auto& entry : doc["shapes"]) {
    const std::string where = " in shapes entry " + std::to_string(out.size() + 1);
    if (!entry.is_object() || !entry.contains("shape") || !entry["shape"].is_string())
      r.fail("shapes entry " + std::to_string(out.size() + 1) + " must be an object with a \"shape\" text");
    r.only_known(entry, kShapeFields, where);
    const std::string text = entry["shape"].get<std::string>();
    Planned p;
    try {
      p.problem = family.parse(text, defaults);
      family.require_tunable(p.problem, text);
    } catch (const InputError& e) {
      r.fail(e.what());
    }
    p.shape.text = p.problem.text();
    if (entry.contains("weight")) {
      const json& w = entry["weight"];
      if (!w.is_number() || !std::isfinite(w.get<double>()) || w.get<double>() <= 0)
        r.fail("weight of '" + text + "' must be a positive number");
      p.shape.weight = w.get<double>();
    }
    if (!seen.insert(p.shape.text).second) r.fail("shape '" + p.shape.text + "' is named twice");
    p.shape.starts = read_starts(r, space, entry, text);
    out.push_back(std::move(p));
  }
  return out;
}

bool heavier(const WorkloadShape& a, const WorkloadShape& b) {
  return a.weight != b.weight ? a.weight > b.weight : a.text < b.text;
}

// Each group's problems from the smallest (by distance from the group's first), a bucket opened
// by each problem further than kBucketSpan from the bucket's first.
std::vector<WorkloadBucket> plan(const KernelFamily& family, std::vector<Planned> shapes) {
  std::map<std::string, std::vector<Planned>> groups;
  for (auto& s : shapes) groups[family.workload_group(s.problem)].push_back(std::move(s));
  std::vector<WorkloadBucket> out;
  for (auto& [group, members] : groups) {
    const Problem origin = std::min_element(members.begin(), members.end(), [&](const Planned& a, const Planned& b) {
                             return a.problem.values() < b.problem.values();
                           })->problem;
    std::stable_sort(members.begin(), members.end(), [&](const Planned& a, const Planned& b) {
      return family.problem_distance(origin, a.problem) < family.problem_distance(origin, b.problem);
    });
    const Problem* first = nullptr;
    for (const auto& m : members) {
      if (!first || family.problem_distance(*first, m.problem) > kBucketSpan) {
        out.push_back(WorkloadBucket{group, {}, 0});
        first = &m.problem;
      }
      out.back().shapes.push_back(m.shape);
      out.back().weight += m.shape.weight;
    }
  }
  for (auto& b : out) std::sort(b.shapes.begin(), b.shapes.end(), heavier);
  std::stable_sort(out.begin(), out.end(), [](const WorkloadBucket& a, const WorkloadBucket& b) { return a.weight > b.weight; });
  return out;
}

}  // namespace

std::vector<Genome> WorkloadBucket::starts() const {
  std::vector<Genome> out;
  std::set<std::string> seen;
  for (const auto& s : shapes)
    for (const auto& g : s.starts)
      if (seen.insert(g.text()).second) out.push_back(g);
  return out;
}

std::vector<std::string> WorkloadBucket::run_shapes() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < shapes.size() && i < kRunShapes; ++i) out.push_back(shapes[i].text);
  return out;
}

Workload read_workload(const std::string& path, const std::string& seed) {
  const Reader r{path};
  const json doc = r.document();
  if (!doc.is_object()) r.fail("must be a JSON object");
  r.only_known(doc, kFields, "");
  Workload w;
  w.name = r.text_field(doc, "name");
  w.seed = r.text_field(doc, "seed");
  if (!seed.empty() && !w.seed.empty() && seed != w.seed)
    r.fail("names seed '" + w.seed + "', the command line '" + seed + "'");
  if (w.seed.empty()) w.seed = seed;
  if (w.seed.empty()) r.fail("names no seed: give --seed or a \"seed\" field");
  const KernelTemplate* tmpl = find_template(w.seed);
  if (!tmpl) r.fail("unknown seed '" + w.seed + "'");
  if (w.name.empty()) w.name = std::filesystem::path(path).stem().string();
  w.buckets = plan(*tmpl->family, read_shapes(r, SearchSpace::for_template(w.seed), doc));
  for (const auto& b : w.buckets) w.weight += b.weight;
  return w;
}

int32_t max_evals_share(const Workload& w, const WorkloadBucket& b, int32_t total) {
  if (total <= 0) return 0;
  const double share = std::floor(total * b.weight / w.weight);
  return std::max<int32_t>(1, static_cast<int32_t>(share));
}

}  // namespace evo::cli
