// The attention family's FaParams is the ABI between a kernel and whoever launches it, and it has
// one definition (kernel_templates/attention/params.h). Two compilers read it: the host's (the
// worker, the exported entry point) and NVRTC (the kernel text, which inlines it). Both are held
// to one table of offsets here, so that neither view can drift from the other unnoticed.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "attention/params.h"
#include "kernel_compiler.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

// Every field and its byte offset; the tensor maps are 64-byte aligned, 128 bytes each.
#define EVO_FA_PARAMS_LAYOUT(X) \
  X(q, 0)                       \
  X(k, 8)                       \
  X(v, 16)                      \
  X(o, 24)                      \
  X(batch, 32)                  \
  X(heads, 36)                  \
  X(seq_q, 40)                  \
  X(seq_k, 44)                  \
  X(softmax_scale, 48)          \
  X(heads_kv, 52)               \
  X(workspace, 56)              \
  X(cu_seqlens_q, 64)           \
  X(cu_seqlens_k, 72)           \
  X(total_q, 80)                \
  X(total_k, 84)                \
  X(q_scale, 88)                \
  X(k_scale, 96)                \
  X(v_scale, 104)               \
  X(q_map, 128)                 \
  X(k_map, 256)                 \
  X(v_map, 384)                 \
  X(o_map, 512)
constexpr size_t kFaParamsSize = 640;
constexpr size_t kFaParamsAlign = 64;

#define EVO_HOST_OFFSET_CHECK(field, offset) \
  static_assert(offsetof(FaParams, field) == (offset), "FaParams::" #field " moved on the host");
EVO_FA_PARAMS_LAYOUT(EVO_HOST_OFFSET_CHECK)
static_assert(sizeof(FaParams) == kFaParamsSize, "FaParams changed size on the host");
static_assert(alignof(FaParams) == kFaParamsAlign, "FaParams changed alignment on the host");

// The same table as static_asserts in NVRTC's view, appended to the kernel text the worker
// compiles: a drift fails that compile and names the field. NVRTC has no constant offsetof
// (nor __builtin_offsetof); its front end's __INTADDR__ folds a member's address to a constant.
std::string device_layout_checks() {
  std::string out;
#define EVO_DEVICE_OFFSET_CHECK(field, offset)                                                     \
  out += "static_assert(__INTADDR__(&((evo::FaParams*)0)->" #field ") == " #offset ", \"FaParams::" #field \
         " moved in the kernel\");\n";
  EVO_FA_PARAMS_LAYOUT(EVO_DEVICE_OFFSET_CHECK)
#undef EVO_DEVICE_OFFSET_CHECK
  out += "static_assert(sizeof(evo::FaParams) == " + std::to_string(kFaParamsSize) +
         ", \"FaParams changed size in the kernel\");\n";
  out += "static_assert(alignof(evo::FaParams) == " + std::to_string(kFaParamsAlign) +
         ", \"FaParams changed alignment in the kernel\");\n";
  out += "extern \"C\" __global__ void evo_params_layout_probe(const __grid_constant__ evo::FaParams p) {\n"
         "  if (p.batch < 0) *static_cast<int*>(p.o) = p.heads;\n"
         "}\n";
  return out;
}

TEST(ParamsLayout, TheKernelTextSeesTheHostLayout) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 1);
  const KernelTemplate* t = find_template("fa_s512_v3");
  ASSERT_NE(t, nullptr);
  const std::string source = std::string(t->source) + "\n" + device_layout_checks();
  try {
    const CompiledKernel k = compiler.compile("params_layout", source, "evo_params_layout_probe");
    EXPECT_EQ(k.lowered_name, "evo_params_layout_probe");
  } catch (const CompileError& e) {
    FAIL() << e.what() << "\n" << e.log();
  }
}

// The check itself bites: a table that disagrees with the header is a compile error.
TEST(ParamsLayout, ADriftedOffsetFailsTheDeviceCheck) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 1);
  std::string checks = device_layout_checks();
  const std::string right = "->workspace) == 56";
  ASSERT_NE(checks.find(right), std::string::npos);
  checks.replace(checks.find(right), right.size(), "->workspace) == 52");
  const std::string source = std::string(find_template("fa_s512_v3")->source) + "\n" + checks;
  try {
    compiler.compile("params_layout_drifted", source, "evo_params_layout_probe");
    ADD_FAILURE() << "a drifted offset compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("FaParams::workspace moved in the kernel"), std::string::npos) << e.log();
  }
}

}  // namespace
}  // namespace evo
