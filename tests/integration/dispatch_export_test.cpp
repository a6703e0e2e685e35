// A shape suite end to end on loopback: evod + evo-worker (model backend) tune two runs for two
// shape buckets, `evoctl export RUN RUN` turns their winners into one dispatch table and the bench's
// dispatch file, and the table builds with the real nvcc (skipped without nvcc) exposing
// evo_attention_forward. No GPU needed.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "process_harness.h"

namespace evo::it {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string find_tool(const char* name) {
  const char* home = std::getenv("CUDA_HOME");
  for (const std::string& dir : {std::string(home ? home : ""), std::string("/usr/local/cuda")}) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / "bin" / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

// One small run (the same rng seed for every run: the same genomes, compiled once).
v1::SubmitRunRequest small_run(const std::vector<std::string>& shapes) {
  v1::SubmitRunRequest req = run_request(1, 4, 2, 11);
  for (const auto& s : shapes) req.add_shapes(s);
  return req;
}

// evoctl as a user runs it; returns the exit status, its output in *log.
int evoctl(Cluster& c, const std::vector<std::string>& args, const std::string& name, std::string* log) {
  std::vector<std::string> argv = {EVOCTL_BIN, "--coordinator", c.address()};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p(argv, c.dir() + "/" + name + ".log");
  const int rc = p.wait(60000);
  *log = p.log();
  return rc;
}

TEST(DispatchExport, TwoRunsForTwoShapesExportAsOneTableThatNvccBuilds) {
  Cluster c;
  c.start_evod();
  c.start_worker("a");
  c.start_worker("b");
  v1::Run small, medium, overlap;
  ASSERT_TRUE(c.submit(small_run({"1x8x512x64", "1x8x512x64:causal"}), &small).ok());
  ASSERT_TRUE(c.submit(small_run({"2x8x512x64"}), &medium).ok());
  ASSERT_TRUE(c.submit(small_run({"2x8x512x64"}), &overlap).ok());
  for (const auto* run : {&small, &medium, &overlap})
    ASSERT_TRUE(c.wait_done(run->run_id(), 480)) << c.evod().log();
  const std::string small_best = c.leaderboard(small.run_id(), 1).elites(0).genome();
  const std::string medium_best = c.leaderboard(medium.run_id(), 1).elites(0).genome();

  const fs::path out = fs::path(c.dir()) / "table.cu";
  std::string log;
  ASSERT_EQ(evoctl(c, {"export", small.run_id(), medium.run_id(), "--out", out.string()}, "export", &log), 0) << log;
  // From the response's fields: the model worker's target, and both buckets estimated.
  EXPECT_NE(log.find("-arch=sm_90a -o libtable.so " + out.string() + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("ESTIMATED: 2 of 2 winners were chosen by the model evaluator"), std::string::npos) << log;

  const std::string source = slurp(out);
  EXPECT_NE(source.find("struct Variant0"), std::string::npos);
  EXPECT_NE(source.find("struct Variant1"), std::string::npos);
  EXPECT_NE(source.find("{1, 8, 8, 512, 512, 64, 0, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(source.find("{1, 8, 8, 512, 512, 64, 1, 0, 0, 0},"), std::string::npos);
  EXPECT_NE(source.find("{2, 8, 8, 512, 512, 64, 0, 0, 0, 1},"), std::string::npos);
  EXPECT_NE(source.find("run " + small.run_id() + ": " + small_best), std::string::npos);
  EXPECT_NE(source.find("run " + medium.run_id() + ": " + medium_best), std::string::npos);

  const std::string report = slurp(fs::path(c.dir()) / "table.report.md");
  EXPECT_NE(report.find("## Buckets"), std::string::npos);
  EXPECT_NE(report.find("ESTIMATED"), std::string::npos) << "the model backend's figures must say so";

  const fs::path dispatch = fs::path(c.dir()) / "table.dispatch.json";
  const std::string json = slurp(dispatch);
  EXPECT_EQ(count_of(json, R"("cu": "table.cu")"), 3u) << json;
  // Each run's shapes with its own winner (the two winners may be the same genome).
  EXPECT_EQ(count_of(json, R"("run_id": ")" + small.run_id() + "\""), 2u) << json;
  EXPECT_EQ(count_of(json, R"("run_id": ")" + medium.run_id() + "\""), 1u) << json;
  EXPECT_NE(json.find(R"("genome": ")" + small_best + "\""), std::string::npos) << json;
  EXPECT_NE(json.find(R"("genome": ")" + medium_best + "\""), std::string::npos) << json;

  // The bench reads it as it is (when python3 is here): three entries, each pointing at table.cu.
  if (std::system("python3 -c 'pass' >/dev/null 2>&1") == 0) {
    const std::string check = "cd '" EVO_BENCH_DIR "' && python3 -c \"import bench_dispatch as d; t = d.load_dispatch('" +
                              dispatch.string() +
                              "'); e = t.entries(); assert len(e) == 3 and all(x.path.endswith('/table.cu') for x in e), e\"";
    EXPECT_EQ(std::system(check.c_str()), 0) << check;
  }

  // A shape in two runs is refused in one line, and nothing is written.
  const fs::path refused = fs::path(c.dir()) / "refused.cu";
  EXPECT_EQ(evoctl(c, {"export", medium.run_id(), overlap.run_id(), "--out", refused.string()}, "refused", &log), 1);
  EXPECT_NE(log.find("evoctl: INVALID_ARGUMENT: shape 2x8x512x64 is in runs"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(refused));

  const std::string nvcc = find_tool("nvcc");
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (CUDA_HOME or /usr/local/cuda): the build of the table is not checked";
  const fs::path so = fs::path(c.dir()) / "libtable.so";
  const std::string build = nvcc + " -O3 -shared -Xcompiler -fPIC -arch=sm_90a -o " + so.string() + " " + out.string() +
                            " > " + c.dir() + "/nvcc.log 2>&1";
  ASSERT_EQ(std::system(build.c_str()), 0) << slurp(fs::path(c.dir()) / "nvcc.log");
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_NE(dlsym(lib, "evo_attention_forward"), nullptr);
  dlclose(lib);
}

// `evoctl export RUN --python DIR`: the evo_kernels package, whose manifest and files the package's
// own rules check (tests/unit/cli/torch_package_rules_test.py --package DIR); a folder not empty is
// refused. Building it needs PyTorch and nvcc: the GPU suite does that (docs/exported-kernel.md).
TEST(DispatchExport, APythonPackageHoldsTheTableAndAManifestItsRulesRead) {
  Cluster c;
  c.start_evod();
  c.start_worker("a");
  v1::Run run;
  ASSERT_TRUE(c.submit(small_run({"1x8x512x64", "1x8x512x64:causal"}), &run).ok());
  ASSERT_TRUE(c.wait_done(run.run_id(), 480)) << c.evod().log();

  const fs::path dir = fs::path(c.dir()) / "pkg";
  std::string log;
  ASSERT_EQ(evoctl(c, {"export", run.run_id(), "--python", dir.string()}, "export_python", &log), 0) << log;
  EXPECT_NE(log.find("sm_90a: runs " + run.run_id() + " (1 bucket)"), std::string::npos) << log;
  EXPECT_NE(log.find("ESTIMATED: this winner was chosen by the model evaluator"), std::string::npos) << log;
  EXPECT_NE(log.find("pip install --no-build-isolation --no-index " + dir.string()), std::string::npos) << log;
  const std::string source = slurp(dir / "evo_kernels/kernels/sm_90a/kernel.cu");
  EXPECT_NE(source.find("evo_attention_forward_dtype"), std::string::npos);
  EXPECT_NE(slurp(dir / "evo_kernels/kernels/sm_90a/kernel.report.md").find("kernel.cu"), std::string::npos);
  EXPECT_EQ(count_of(slurp(dir / "evo_kernels/kernels/sm_90a/kernel.dispatch.json"), R"("cu": "kernel.cu")"), 2u);

  if (std::system("python3 -c 'pass' >/dev/null 2>&1") == 0) {
    const std::string check = "python3 '" EVO_SOURCE_DIR "/tests/unit/cli/torch_package_rules_test.py' --package '" +
                              dir.string() + "' > '" + c.dir() + "/rules.log' 2>&1";
    EXPECT_EQ(std::system(check.c_str()), 0) << slurp(fs::path(c.dir()) / "rules.log");
  }

  EXPECT_EQ(evoctl(c, {"export", run.run_id(), "--python", dir.string()}, "export_again", &log), 1);
  EXPECT_NE(log.find("the folder is not empty"), std::string::npos) << log;
}

}  // namespace
}  // namespace evo::it
