// Runs everywhere (NVRTC needs no GPU): every planted kernel and the reference kernel compile for
// Hopper through the evaluator's compiler, and the spill kernel fails the resource gate there —
// so that on a GPU host the planted tests exercise the gates, not a typo.
#include <gtest/gtest.h>

#include <filesystem>

#include "device_limits.h"
#include "family_runtime.h"
#include "gpu_test_support.h"
#include "kernel_compiler.h"
#include "resource_gate.h"
#include "template_registry.h"

namespace evo {
namespace {

using testing_gpu::problem;

class PlantedCompile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() / "evo-gpu-tests-planted-cache").string();
    compiler_ = new KernelCompiler(dir_, "sm_90a", 2);
  }
  static void TearDownTestSuite() {
    delete compiler_;
    compiler_ = nullptr;
  }
  static CompiledKernel compile(const std::string& file, const std::string& name) {
    const SourceKernel k = testing_gpu::planted_kernel(file, name);
    return compiler_->compile(k.source_id, k.source, k.name_expression(problem("1x8x512x64")));
  }
  static std::string dir_;
  static KernelCompiler* compiler_;
};
std::string PlantedCompile::dir_;
KernelCompiler* PlantedCompile::compiler_ = nullptr;

TEST_F(PlantedCompile, EveryPlantedKernelCompiles) {
  for (const auto& [file, name] : std::vector<std::pair<std::string, std::string>>{
           {"naive_correct.cu", "naive_correct"},
           {"wrong_output.cu", "wrong_output"},
           {"hang.cu", "hang"},
           {"far_out_of_bounds.cu", "far_out_of_bounds"},
           {"off_by_one_write.cu", "off_by_one_write"}}) {
    const CompiledKernel k = compile(file, name);
    EXPECT_FALSE(k.lowered_name.empty()) << file;
    EXPECT_TRUE(std::filesystem::exists(k.cubin_path)) << file;
    EXPECT_FALSE(resource_violation(k.resources, kDefaultSmemLimit).has_value()) << file;
  }
}

// The bf16 control, which the GPU suite runs against the bf16 reference: its kernel of each dtype
// compiles from the one planted text, under the name the evaluator asks for.
TEST_F(PlantedCompile, TheDtypeControlCompilesForEachDtype) {
  const SourceKernel k = testing_gpu::planted_dtype_kernel("naive_correct.cu", "naive_correct_dtype");
  for (const char* shape : {"1x8x512x64", "1x8x512x64:causal:bf16"}) {
    const std::string name = k.name_expression(problem(shape));
    const CompiledKernel c = compiler_->compile(k.source_id, k.source, name);
    EXPECT_FALSE(c.lowered_name.empty()) << name;
    EXPECT_TRUE(std::filesystem::exists(c.cubin_path)) << name;
  }
  EXPECT_EQ(k.name_expression(problem("1x8x512x64:causal:bf16")), "planted::naive_correct_dtype<1, 1>");
}

TEST_F(PlantedCompile, SpillKernelFailsTheResourceGate) {
  const CompiledKernel k = compile("spill.cu", "spill");
  const auto why = resource_violation(k.resources, kDefaultSmemLimit);
  ASSERT_TRUE(why.has_value()) << k.resources.ptxas_log();
}

// Each reference kernel the family names compiles from its family's reference source, by its C name.
TEST_F(PlantedCompile, ReferenceKernelCompilesByItsCName) {
  for (const FamilyRuntime* family : family_runtimes()) {
    const KernelFamily* host = find_family(family->family());
    ASSERT_NE(host, nullptr) << family->family();
    for (std::string_view kernel : family->reference_kernels()) {
      const std::string name(kernel);
      const CompiledKernel k =
          compiler_->compile("reference_" + std::string(family->family()), host->reference_source, name);
      EXPECT_EQ(k.lowered_name, name);
    }
  }
}

}  // namespace
}  // namespace evo
