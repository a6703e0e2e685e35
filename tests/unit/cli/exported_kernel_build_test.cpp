// Builds an exported .cu with the real nvcc, exactly as a user would, loads it and calls it with
// shapes it must refuse. Needs nvcc (skips without it) but no GPU and no driver: the refusals
// happen before any CUDA call.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "export_fixtures.h"
#include "exporter.h"

namespace evo {
namespace {

namespace fs = std::filesystem;
using EntryPoint = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, float, int,
                           void*);
constexpr int kCudaErrorInvalidValue = 1;

std::string find_nvcc() {
  const char* home = std::getenv("CUDA_HOME");
  for (const std::string& dir : {home ? std::string(home) : std::string(), std::string("/usr/local/cuda")}) {
    if (dir.empty()) continue;
    const fs::path nvcc = fs::path(dir) / "bin" / "nvcc";
    if (fs::exists(nvcc)) return nvcc.string();
  }
  return "";
}

// An export built with nvcc as the report says, and loaded; kept for the tests.
struct Built {
  int status = -1;
  std::string log;
  void* handle = nullptr;
};

class ExportedKernel : public ::testing::Test {
 protected:
  static Built build(const std::string& name, const v1::ExportResponse& r) {
    Built b;
    std::ofstream(dir_ / (name + ".cu")) << r.source();
    const std::string cmd =
        exported_build_command((dir_ / (name + ".cu")).string(), (dir_ / ("lib" + name + ".so")).string());
    // The command as the report prints it, with this machine's nvcc in front.
    const std::string full = nvcc_ + cmd.substr(cmd.find(' ')) + " > " + (dir_ / (name + ".log")).string() + " 2>&1";
    b.status = std::system(full.c_str());
    std::ifstream log(dir_ / (name + ".log"));
    b.log.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
    if (b.status == 0) {
      b.handle = dlopen((dir_ / ("lib" + name + ".so")).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (b.handle == nullptr) b.log += dlerror();
    }
    return b;
  }
  static void SetUpTestSuite() {
    nvcc_ = find_nvcc();
    if (nvcc_.empty()) return;
    dir_ = fs::temp_directory_path() / ("evo_export_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const Genome seed = testing::default_genome();
    standalone_ = build("best", export_standalone(seed, {testing::shape_1x8x512x64()}, testing::measured_evaluation(false)));
    // A dispatch table whose second genome changes every gene that has another value (a split-KV
    // genome where the space has that gene): the other code paths of the template and exporter.
    auto genes = seed.genes();
    genes[0].second = 64;  // BLOCK_M
    for (auto& [name, value] : genes)
      if (name == "SPLIT_KV") value = 2;
    ProblemShape big;
    big.batch = 16;
    big.heads = 16;
    dispatch_ = build("table", export_dispatch_table({{seed, {testing::shape_1x8x512x64()}, testing::measured_evaluation(false)},
                                                      {Genome(seed.template_id(), genes), {big}, testing::measured_evaluation(false)}}));
  }
  static void TearDownTestSuite() {
    for (Built* b : {&standalone_, &dispatch_})
      if (b->handle) dlclose(b->handle);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (nvcc_.empty()) GTEST_SKIP() << "nvcc not found (set CUDA_HOME): cannot build the exported kernel";
  }
  static EntryPoint entry_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    EXPECT_NE(b.handle, nullptr) << b.log;
    return b.handle ? reinterpret_cast<EntryPoint>(dlsym(b.handle, "evo_attention_forward")) : nullptr;
  }

  static inline std::string nvcc_;
  static inline fs::path dir_;
  static inline Built standalone_, dispatch_;
};

TEST_F(ExportedKernel, StandaloneBuildsAndExposesTheEntryPoint) { EXPECT_NE(entry_of(standalone_), nullptr); }

TEST_F(ExportedKernel, DispatchTableBuildsAndExposesTheEntryPoint) { EXPECT_NE(entry_of(dispatch_), nullptr); }

void expect_refusals(EntryPoint f) {
  // Fake device pointers: each call must be refused before anything dereferences them.
  char buf[4] = {};
  const void* p = buf;
  void* out = buf;
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 96, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "head_dim 96";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 256, 64, 0.125f, 1, nullptr), kCudaErrorInvalidValue) << "causal seq_q != seq_k";
  EXPECT_EQ(f(nullptr, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "null q";
  EXPECT_EQ(f(p, p, p, nullptr, 1, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "null o";
  EXPECT_EQ(f(p, p, p, out, 0, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "batch 0";
  EXPECT_EQ(f(p, p, p, out, 1, -8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "heads -8";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, 0.125f, 2, nullptr), kCudaErrorInvalidValue) << "causal 2";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, NAN, 0, nullptr), kCudaErrorInvalidValue) << "NaN scale";
  EXPECT_EQ(f(p, p, p, out, 1024, 1024, 4096, 4096, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue)
      << "over 2^31 elements";
}

TEST_F(ExportedKernel, RefusesWhatItCannotServeWithoutTouchingTheDriver) {
  const EntryPoint standalone = entry_of(standalone_);
  ASSERT_NE(standalone, nullptr);
  expect_refusals(standalone);
  const EntryPoint table = entry_of(dispatch_);
  ASSERT_NE(table, nullptr);
  expect_refusals(table);
}

}  // namespace
}  // namespace evo
