// NVRTC runs here without a GPU: these compile real (small) kernels for real architectures.
#include "kernel_compiler.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "errors.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

// A kernel whose local array is indexed by a run-time value: it must get a stack frame.
constexpr const char* kLocalArraySource = R"(
namespace t {
template <int N>
__global__ void local_array(float* o) {
  float a[N];
  for (int i = 0; i < N; ++i) a[i] = o[i * threadIdx.x];
  o[threadIdx.x] = a[o[0] > 0 ? (int)o[1] : 0];
}
}  // namespace t
)";

constexpr const char* kRegisterOnlySource = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

TEST(KernelCompiler, CompilesANameExpressionAndReadsItsResources) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 2);
  CompiledKernel k = compiler.compile("local_array", kLocalArraySource, "t::local_array<512>");
  EXPECT_EQ(k.lowered_name, "_ZN1t11local_arrayILi512EEEvPf");
  EXPECT_GT(k.resources.registers(), 0);
  EXPECT_GE(k.resources.stack_frame_bytes(), 2048);  // 512 floats cannot live in registers
  EXPECT_FALSE(k.cache_hit);
  EXPECT_NE(k.options.find("--gpu-architecture=sm_90a"), std::string::npos);
  EXPECT_NE(k.options.find("--ptxas-options=-v"), std::string::npos);
  EXPECT_EQ(k.options.find("-G"), std::string::npos);
  EXPECT_EQ(k.options.find("-lineinfo"), std::string::npos);
  EXPECT_GT(test::read_text(k.cubin_path).size(), 100u);
}

TEST(KernelCompiler, SecondCompileIsACacheHitEvenInANewCompiler) {
  test::TempDir dir;
  CompiledKernel first, second;
  {
    KernelCompiler compiler(dir.path(), "sm_80", 1);
    first = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  }
  KernelCompiler compiler(dir.path(), "sm_80", 1);
  second = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.compile_ms, 0);
  EXPECT_EQ(first.lowered_name, "axpy");
  EXPECT_EQ(first.resources.registers(), second.resources.registers());
  EXPECT_EQ(first.resources.stack_frame_bytes(), 0);
  // Another arch is another key.
  KernelCompiler other(dir.path(), "sm_90a", 1);
  EXPECT_FALSE(other.compile("axpy", kRegisterOnlySource, "axpy").cache_hit);
}

// Gate 3 reads the SASS with cuobjdump when the kernel is compiled, on the compile pool; a cache
// hit reads the verdict back from the sidecar, with no cuobjdump run on the evaluation's path.
TEST(KernelCompiler, SassVerdictIsReadOnceAtCompileAndKeptInTheCache) {
  test::TempDir dir, tools;
  const std::string calls = tools.path() + "/calls";
  const std::string tool = tools.path() + "/cuobjdump";
  test::write_text(tool, "#!/bin/sh\necho run >> '" + calls +
                             "'\nprintf '\\t\\tFunction : axpy\\n  /*0000*/ HMMA.16816.F32 R8, R4, R12, R8 ;\\n'\n");
  ::chmod(tool.c_str(), 0755);
  const std::string saved_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (tools.path() + ":" + saved_path).c_str(), 1);
  CompiledKernel first, second;
  {
    KernelCompiler compiler(dir.path(), "sm_80", 1);
    first = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  }
  KernelCompiler compiler(dir.path(), "sm_80", 1);
  second = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  ::setenv("PATH", saved_path.c_str(), 1);
  EXPECT_EQ(first.tensor_cores.verdict, v1::VERDICT_PASSED) << first.tensor_cores.detail;
  EXPECT_EQ(first.tensor_cores.detail, "1 HMMA instructions in the SASS");
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.tensor_cores.verdict, v1::VERDICT_PASSED);
  EXPECT_EQ(second.tensor_cores.detail, first.tensor_cores.detail);
  EXPECT_EQ(test::read_text(calls), "run\n") << "cuobjdump ran again on a cache hit";
}

TEST(KernelCompiler, CorruptCacheEntryIsRecompiled) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_80", 1);
  CompiledKernel k = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  test::write_text(k.cubin_path, "garbage");
  CompiledKernel again = compiler.compile("axpy", kRegisterOnlySource, "axpy");
  EXPECT_FALSE(again.cache_hit);
  EXPECT_GT(test::read_text(again.cubin_path).size(), 100u);
}

TEST(KernelCompiler, SourceErrorIsACompileErrorWithTheLog) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 1);
  try {
    compiler.compile("broken", "__global__ void k() { undeclared_thing(); }", "k");
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
    EXPECT_NE(e.log().find("error"), std::string::npos);
  }
}

TEST(KernelCompiler, AsyncRequestsForOneKeyCompileOnce) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 4);
  std::vector<std::shared_future<CompiledKernel>> futures;
  for (int i = 0; i < 6; ++i)
    futures.push_back(compiler.compile_async("local_array", kLocalArraySource, "t::local_array<16>"));
  // And different keys in parallel with it.
  auto other = compiler.compile_async("local_array", kLocalArraySource, "t::local_array<8>");
  int fresh = 0;
  for (auto& f : futures) fresh += f.get().cache_hit ? 0 : 1;
  // Requests that arrived while the first was in flight share its result; any later one finds
  // the disk cache. Either way NVRTC ran exactly once for this key.
  EXPECT_GE(fresh, 1);
  double ms = -1;
  for (auto& f : futures)
    if (!f.get().cache_hit) {
      if (ms < 0) ms = f.get().compile_ms;
      EXPECT_EQ(f.get().compile_ms, ms) << "a second NVRTC run happened";
    }
  EXPECT_EQ(other.get().lowered_name, "_ZN1t11local_arrayILi8EEEvPf");
}

TEST(KernelCompiler, CompilesTheReferenceAttentionKernel) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 1);
  const KernelFamily* attention = find_family("attention");
  ASSERT_NE(attention, nullptr);
  const std::string fp16 = "evo_reference_attention_fp16";
  CompiledKernel k = compiler.compile("reference_attention", std::string(attention->reference_source), fp16);
  EXPECT_EQ(k.lowered_name, "evo_reference_attention_fp16");
  EXPECT_GT(k.resources.registers(), 0);
  // The bf16 and float kernels are in the same cubin, under their C names (the ELF's symbol table names every
  // kernel): the one compile serves every dtype.
  std::ifstream cubin(k.cubin_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(cubin)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty()) << k.cubin_path;
  EXPECT_NE(bytes.find(std::string("evo_reference_attention_bf16") + '\0'), std::string::npos);
  EXPECT_NE(bytes.find(std::string("evo_reference_attention_fp32") + '\0'), std::string::npos) << "e4m3's";
  EXPECT_EQ(bytes.find(std::string("evo_reference_attention_fp64") + '\0'), std::string::npos);
}

TEST(KernelCompiler, BadArchIsAnInputError) {
  test::TempDir dir;
  EXPECT_THROW(KernelCompiler(dir.path(), "compute_90", 1), InputError);
  EXPECT_THROW(KernelCompiler(dir.path(), "sm90", 1), InputError);
}

TEST(KernelCompiler, MissingCudaHeadersSayToSetCudaHome) {
  test::TempDir dir;
  const char* old = std::getenv("CUDA_HOME");
  const std::string saved = old ? old : "";
  ::setenv("CUDA_HOME", dir.path().c_str(), 1);
  try {
    KernelCompiler compiler(dir.path(), "sm_90a", 1);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("set CUDA_HOME"), std::string::npos) << e.what();
  }
  if (old) ::setenv("CUDA_HOME", saved.c_str(), 1); else ::unsetenv("CUDA_HOME");
}

TEST(KernelCompiler, DefaultCacheDirFollowsTheEnvironment) {
  const char* old = std::getenv("EVO_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("EVO_CACHE_DIR", "/somewhere/evo", 1);
  EXPECT_EQ(KernelCompiler::default_cache_dir(), "/somewhere/evo");
  ::unsetenv("EVO_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(KernelCompiler::default_cache_dir(), "/xdg/evo");
  ::unsetenv("XDG_CACHE_HOME");
  if (old) ::setenv("EVO_CACHE_DIR", saved.c_str(), 1);
}

}  // namespace
}  // namespace evo
