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

class ExportedKernel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    nvcc_ = find_nvcc();
    if (nvcc_.empty()) return;
    dir_ = fs::temp_directory_path() / ("evo_export_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const auto r = export_standalone(testing::default_genome(), {testing::shape_1x8x512x64()},
                                     testing::measured_evaluation(false));
    std::ofstream(dir_ / "best.cu") << r.source();
    const std::string cmd = exported_build_command((dir_ / "best.cu").string(), (dir_ / "libbest.so").string());
    // The command as the report prints it, with this machine's nvcc in front.
    const std::string full = nvcc_ + cmd.substr(cmd.find(' ')) + " > " + (dir_ / "nvcc.log").string() + " 2>&1";
    build_status_ = std::system(full.c_str());
    if (build_status_ == 0) handle_ = dlopen((dir_ / "libbest.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  static void TearDownTestSuite() {
    if (handle_) dlclose(handle_);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (nvcc_.empty()) GTEST_SKIP() << "nvcc not found (set CUDA_HOME): cannot build the exported kernel";
    std::ifstream log(dir_ / "nvcc.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_EQ(build_status_, 0) << "nvcc failed on the exported kernel:\n" << text;
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  EntryPoint entry() { return reinterpret_cast<EntryPoint>(dlsym(handle_, "evo_attention_forward")); }

  static inline std::string nvcc_;
  static inline fs::path dir_;
  static inline int build_status_ = -1;
  static inline void* handle_ = nullptr;
};

TEST_F(ExportedKernel, ExposesTheEntryPoint) { EXPECT_NE(entry(), nullptr); }

TEST_F(ExportedKernel, RefusesWhatItCannotServeWithoutTouchingTheDriver) {
  auto f = entry();
  ASSERT_NE(f, nullptr);
  // Fake device pointers: each call must be refused before anything dereferences them.
  char buf[4];
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

}  // namespace
}  // namespace evo
