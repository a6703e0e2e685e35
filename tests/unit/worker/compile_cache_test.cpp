#include "compile_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "test_support.h"

namespace evo {
namespace {

CacheEntry sample_entry() {
  CacheEntry e;
  e.lowered_name = "_Z6kernelPf";
  e.name_expression = "kernel";
  e.options = "--gpu-architecture=sm_90a -std=c++17";
  e.resources.set_registers(40);
  e.resources.set_stack_frame_bytes(0);
  e.resources.set_static_smem_bytes(512);
  e.resources.set_ptxas_log("ptxas info    : Used 40 registers\n");
  return e;
}

TEST(CompileCache, KeyChangesWithEveryInput) {
  const auto base = CompileCache::key("src", "k<1>", "sm_90a", "13.0", "-O3");
  EXPECT_EQ(base, CompileCache::key("src", "k<1>", "sm_90a", "13.0", "-O3"));
  EXPECT_NE(base, CompileCache::key("src2", "k<1>", "sm_90a", "13.0", "-O3"));
  EXPECT_NE(base, CompileCache::key("src", "k<2>", "sm_90a", "13.0", "-O3"));
  EXPECT_NE(base, CompileCache::key("src", "k<1>", "sm_80", "13.0", "-O3"));
  EXPECT_NE(base, CompileCache::key("src", "k<1>", "sm_90a", "12.8", "-O3"));
  EXPECT_NE(base, CompileCache::key("src", "k<1>", "sm_90a", "13.0", "-O2"));
}

TEST(CompileCache, MissThenHitRoundTrips) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  EXPECT_FALSE(cache.load("abc"));
  cache.store("abc", "CUBINBYTES", sample_entry());
  auto hit = cache.load("abc");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->lowered_name, "_Z6kernelPf");
  EXPECT_EQ(hit->options, "--gpu-architecture=sm_90a -std=c++17");
  EXPECT_EQ(hit->resources.registers(), 40);
  EXPECT_EQ(hit->resources.static_smem_bytes(), 512);
  EXPECT_EQ(test::read_text(hit->cubin_path), "CUBINBYTES");
}

TEST(CompileCache, SassVerdictRoundTripsButASkippedOneIsNotKept) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  CacheEntry e = sample_entry();
  cache.store("abc", "CUBINBYTES", e);
  EXPECT_FALSE(cache.load("abc")->tensor_cores) << "not judged yet";
  e.tensor_cores = SassVerdict{v1::VERDICT_PASSED, "16 QGMMA instructions in the SASS", {{"QGMMA", 16}}};
  cache.store("abc", "CUBINBYTES", e);
  const auto hit = cache.load("abc");
  ASSERT_TRUE(hit && hit->tensor_cores);
  EXPECT_EQ(hit->tensor_cores->verdict, v1::VERDICT_PASSED);
  EXPECT_EQ(hit->tensor_cores->detail, "16 QGMMA instructions in the SASS");
  EXPECT_EQ(hit->tensor_cores->ops, (TensorCoreOps{{"QGMMA", 16}}));
  // Skipped means no cuobjdump was found: a later worker with one must read the SASS itself.
  e.tensor_cores = SassVerdict{v1::VERDICT_SKIPPED, "cuobjdump not found in PATH or $CUDA_HOME/bin", {}};
  cache.store("abc", "CUBINBYTES", e);
  EXPECT_FALSE(cache.load("abc")->tensor_cores);
}

// A sidecar from before the counts were kept has its verdict read again (the SASS gate needs the
// counts for a problem that requires one instruction).
TEST(CompileCache, AVerdictWithoutItsCountsIsReadAgain) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  CacheEntry e = sample_entry();
  e.tensor_cores = SassVerdict{v1::VERDICT_PASSED, "2 HMMA instructions in the SASS", {{"HMMA", 2}}};
  cache.store("abc", "CUBINBYTES", e);
  std::string sidecar = test::read_text(cache.sidecar_path("abc"));
  const size_t ops = sidecar.find("\"ops\"");
  ASSERT_NE(ops, std::string::npos);
  sidecar.replace(ops, 5, "\"old\"");
  test::write_text(cache.sidecar_path("abc"), sidecar);
  const auto hit = cache.load("abc");
  ASSERT_TRUE(hit);
  EXPECT_FALSE(hit->tensor_cores);
}

TEST(CompileCache, UnknownSassVerdictIsAMiss) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  CacheEntry e = sample_entry();
  e.tensor_cores = SassVerdict{v1::VERDICT_PASSED, "2 HMMA instructions in the SASS", {{"HMMA", 2}}};
  cache.store("abc", "CUBINBYTES", e);
  std::string sidecar = test::read_text(cache.sidecar_path("abc"));
  sidecar.replace(sidecar.find("\"passed\""), 8, "\"maybe\"");
  test::write_text(cache.sidecar_path("abc"), sidecar);
  EXPECT_FALSE(cache.load("abc"));
}

TEST(CompileCache, CorruptSidecarIsAMiss) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  cache.store("abc", "CUBINBYTES", sample_entry());
  test::write_text(cache.sidecar_path("abc"), "{\"lowered_name\": \"_Z6ker");  // cut short
  EXPECT_FALSE(cache.load("abc"));
}

TEST(CompileCache, CubinThatDoesNotMatchItsSidecarIsAMiss) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  cache.store("abc", "CUBINBYTES", sample_entry());
  test::write_text(cache.cubin_path("abc"), "CUBINBYTEZ");  // same size, other bytes
  EXPECT_FALSE(cache.load("abc"));
  test::write_text(cache.cubin_path("abc"), "CUBIN");  // truncated
  EXPECT_FALSE(cache.load("abc"));
  std::filesystem::remove(cache.cubin_path("abc"));
  EXPECT_FALSE(cache.load("abc"));
}

TEST(CompileCache, ConcurrentWritersNeverExposeHalfAFile) {
  test::TempDir dir;
  CompileCache cache(dir.path());
  const std::string cubin(1 << 20, 'x');  // large enough that a torn write would show
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, hits{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) cache.store("shared", cubin, sample_entry());
    });
  std::thread reader([&] {
    while (!stop) {
      if (auto e = cache.load("shared")) {
        ++hits;
        if (test::read_text(e->cubin_path).size() != cubin.size()) ++torn;
      }
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_TRUE(cache.load("shared"));
  // No temp file is left behind.
  for (const auto& f : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();
}

TEST(CompileCache, UncreatableDirectoryIsOneClearError) {
  test::TempDir dir;
  test::write_text(dir.path() + "/file", "x");
  try {
    CompileCache cache(dir.path() + "/file/sub");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create compile cache directory"), std::string::npos);
  }
}

}  // namespace
}  // namespace evo
