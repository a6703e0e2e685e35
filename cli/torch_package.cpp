#include "torch_package.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace evo::cli {

namespace {

// The table's arch: evod's (the target its .cu is built for), else the runs' device class's.
std::string arch_of(const PackageTable& t) {
  return t.response.arch().empty() ? t.group.arch : t.response.arch();
}

std::string folder_of(const PackageTable& t) { return "kernels/" + arch_of(t) + "/"; }

}  // namespace

std::vector<ArchGroup> group_runs_by_arch(const std::vector<std::pair<std::string, std::string>>& run_classes) {
  std::vector<ArchGroup> groups;
  for (const auto& [run_id, device_class] : run_classes) {
    if (device_class.empty())
      throw std::invalid_argument("run " + run_id + " has no device class yet (no worker has leased it)");
    const std::string arch = device_class.substr(0, device_class.find('/'));
    auto g = std::find_if(groups.begin(), groups.end(), [&](const ArchGroup& x) { return x.arch == arch; });
    if (g == groups.end()) g = groups.insert(groups.end(), ArchGroup{arch, {}, {}});
    g->run_ids.push_back(run_id);
    if (std::find(g->device_classes.begin(), g->device_classes.end(), device_class) == g->device_classes.end())
      g->device_classes.push_back(device_class);
  }
  return groups;
}

std::string torch_package_manifest(const std::vector<PackageTable>& tables) {
  nlohmann::json libraries = nlohmann::json::array();
  for (const auto& t : tables) {
    nlohmann::json buckets = nlohmann::json::array();
    bool estimated = false;
    for (const auto& b : t.response.buckets()) {
      buckets.push_back({{"run_id", b.run_id()},
                         {"genome", b.genome()},
                         {"shapes", std::vector<std::string>(b.shapes().begin(), b.shapes().end())},
                         {"fitness_us", b.fitness_us()},
                         {"estimated", b.estimated()}});
      estimated = estimated || b.estimated();
    }
    libraries.push_back({{"arch", arch_of(t)},
                         {"source", folder_of(t) + kPackageSourceName},
                         {"device_classes", t.group.device_classes},
                         {"estimated", estimated},
                         {"buckets", buckets}});
  }
  return nlohmann::json{{"format", 1}, {"libraries", libraries}}.dump(2) + "\n";
}

std::vector<std::pair<std::string, std::string>> torch_package_files(const std::vector<PackageTable>& tables) {
  std::set<std::string> archs;
  for (const auto& t : tables)
    if (!archs.insert(arch_of(t)).second)
      throw std::invalid_argument("two tables build for " + arch_of(t) + ": export each architecture's runs once");
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& f : embedded_torch_package()) files.emplace_back(f.path, f.text);
  for (const auto& t : tables) {
    const std::string folder = "evo_kernels/" + folder_of(t);
    files.emplace_back(folder + kPackageSourceName, t.response.source());
    files.emplace_back(folder + "kernel.report.md", t.response.report());
    files.emplace_back(folder + "kernel.dispatch.json", t.dispatch_json);
  }
  files.emplace_back("evo_kernels/manifest.json", torch_package_manifest(tables));
  return files;
}

}  // namespace evo::cli
