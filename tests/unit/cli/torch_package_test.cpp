// The evo_kernels package evoctl export --python writes (cli/torch_package.h): runs grouped by the
// architecture that measured them, the package's files, and its manifest.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "torch_package.h"

namespace evo::cli {
namespace {

v1::ExportResponse response(const std::string& arch, const std::vector<std::pair<std::string, std::string>>& buckets,
                            bool estimated) {
  v1::ExportResponse r;
  r.set_arch(arch);
  r.set_source("// source for " + arch + "\n");
  r.set_report("# report for " + arch + "\n");
  for (const auto& [run, shape] : buckets) {
    v1::ExportBucket* b = r.add_buckets();
    b->set_run_id(run);
    b->set_genome("fa_s512_v3:BLOCK_M=64");
    b->add_shapes(shape);
    b->set_fitness_us(5.5);
    b->set_estimated(estimated);
  }
  return r;
}

TEST(TorchPackage, RunsGroupByTheArchitectureOfTheirDeviceClass) {
  const auto groups = group_runs_by_arch({{"r1", "sm_90a/NVIDIA H200"},
                                          {"r2", "sm_80/NVIDIA A100-SXM4-80GB"},
                                          {"r3", "sm_90a/NVIDIA H100 80GB HBM3"},
                                          {"r4", "sm_90a/NVIDIA H200"}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].arch, "sm_90a");
  EXPECT_EQ(groups[0].run_ids, (std::vector<std::string>{"r1", "r3", "r4"}));
  EXPECT_EQ(groups[0].device_classes,
            (std::vector<std::string>{"sm_90a/NVIDIA H200", "sm_90a/NVIDIA H100 80GB HBM3"}));
  EXPECT_EQ(groups[1].arch, "sm_80");
  EXPECT_EQ(groups[1].run_ids, (std::vector<std::string>{"r2"}));
}

TEST(TorchPackage, ARunWithoutDeviceClassIsRefusedByName) {
  try {
    group_runs_by_arch({{"r1", "sm_90a/model/estimated"}, {"r9", ""}});
    FAIL() << "a run no worker leased was grouped";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("run r9 has no device class"), std::string::npos) << e.what();
  }
}

TEST(TorchPackage, FilesHoldEachArchitecturesTableAndAManifestNamingThem) {
  const std::vector<PackageTable> tables = {
      {{"sm_90a", {"r1"}, {"sm_90a/NVIDIA H200"}}, response("sm_90a", {{"r1", "1x8x512x64:causal"}}, false), "{}\n"},
      {{"sm_80", {"r2"}, {"sm_80/A100"}}, response("sm_80", {{"r2", "1x8x512x64"}}, true), "{}\n"}};
  const auto files = torch_package_files(tables);
  auto text_of = [&](const std::string& path) {
    const auto it = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == path; });
    return it == files.end() ? std::string("<missing>") : it->second;
  };
  for (const char* fixed : {"setup.py", "pyproject.toml", "csrc/evo_op.cpp", "evo_kernels/__init__.py",
                            "evo_kernels/routing.py", "evo_kernels/_ops.py", "evo_kernels/sdpa.py"})
    EXPECT_NE(text_of(fixed), "<missing>") << fixed;
  EXPECT_NE(text_of("csrc/evo_op.cpp").find("TORCH_LIBRARY(evo, m)"), std::string::npos);
  EXPECT_EQ(text_of("evo_kernels/kernels/sm_90a/kernel.cu"), "// source for sm_90a\n");
  EXPECT_EQ(text_of("evo_kernels/kernels/sm_80/kernel.report.md"), "# report for sm_80\n");
  EXPECT_EQ(text_of("evo_kernels/kernels/sm_80/kernel.dispatch.json"), "{}\n");

  const auto manifest = nlohmann::json::parse(text_of("evo_kernels/manifest.json"));
  EXPECT_EQ(manifest["format"], 1);
  ASSERT_EQ(manifest["libraries"].size(), 2u);
  const auto& hopper = manifest["libraries"][0];
  EXPECT_EQ(hopper["arch"], "sm_90a");
  EXPECT_EQ(hopper["source"], "kernels/sm_90a/kernel.cu");
  EXPECT_EQ(hopper["device_classes"], nlohmann::json::array({"sm_90a/NVIDIA H200"}));
  EXPECT_EQ(hopper["estimated"], false);
  EXPECT_EQ(hopper["buckets"][0]["shapes"], nlohmann::json::array({"1x8x512x64:causal"}));
  EXPECT_EQ(hopper["buckets"][0]["run_id"], "r1");
  EXPECT_EQ(manifest["libraries"][1]["estimated"], true);
}

TEST(TorchPackage, TwoTablesForOneArchitectureAreRefused) {
  const std::vector<PackageTable> tables = {
      {{"sm_90a", {"r1"}, {}}, response("sm_90a", {{"r1", "1x8x512x64"}}, false), ""},
      {{"sm_90", {"r2"}, {}}, response("sm_90a", {{"r2", "2x8x512x64"}}, false), ""}};
  EXPECT_THROW(torch_package_files(tables), std::invalid_argument);
}

TEST(TorchPackage, AnEvodWithoutArchNamesTheFolderByTheRunsDeviceClass) {
  const std::vector<PackageTable> tables = {
      {{"sm_80", {"r1"}, {"sm_80/A100"}}, response("", {{"r1", "1x8x512x64"}}, false), ""}};
  const auto manifest = nlohmann::json::parse(torch_package_manifest(tables));
  EXPECT_EQ(manifest["libraries"][0]["arch"], "sm_80");
  EXPECT_EQ(manifest["libraries"][0]["source"], "kernels/sm_80/kernel.cu");
}

}  // namespace
}  // namespace evo::cli
