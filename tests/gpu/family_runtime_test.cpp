// The families' runtimes on the host, no GPU needed: the registry, and attention's inputs, seeds,
// sizes, reference kernel names and sanitizer problems. The pinned values are what the gates drew
// before the family runtime existed (worker/cuda/shape_gates.cpp then): a change to them changes
// every stored result's inputs, so it must be deliberate.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/runtime.h"
#include "family_runtime.h"
#include "gate_math.h"
#include "gpu_test_support.h"
#include "template_registry.h"

namespace evo {
namespace {

using testing_gpu::problem;

uint64_t fnv_of(const std::vector<uint16_t>& v) {
  uint64_t h = 14695981039346656037ull;
  for (uint16_t x : v)
    for (int b = 0; b < 2; ++b) {
      h ^= (x >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  return h;
}

TEST(FamilyRuntimes, EveryFamilyWithKernelsHasARuntimeAndEveryRuntimeAFamily) {
  ASSERT_FALSE(family_runtimes().empty());
  for (const FamilyRuntime* r : family_runtimes()) {
    EXPECT_EQ(find_family_runtime(r->family()), r);
    const KernelFamily* f = find_family(r->family());
    ASSERT_NE(f, nullptr) << r->family();
    // Its reference source defines each kernel it names.
    for (std::string_view name : r->reference_kernels())
      EXPECT_NE(f->reference_source.find("__global__ void " + std::string(name) + "("), std::string_view::npos)
          << name;
  }
  for (const std::string& id : template_ids())
    EXPECT_NE(find_family_runtime(find_template(id)->family->id), nullptr) << id;
  EXPECT_EQ(find_family_runtime("gemm"), nullptr);
  EXPECT_EQ(find_family(""), nullptr);
  EXPECT_EQ(&runtime_for(problem("1x8x512x64")), &attention::runtime());
}

TEST(AttentionRuntime, ReferenceKernelPerDtype) {
  const FamilyRuntime& r = attention::runtime();
  EXPECT_EQ(r.reference_kernel(problem("1x8x512x64")), "evo_reference_attention_fp16");
  EXPECT_EQ(r.reference_kernel(problem("1x8x512x64:causal:bf16")), "evo_reference_attention_bf16");
  // The parent compiles the source under the first name; the cubin holds them all.
  EXPECT_EQ(r.reference_kernels().front(), "evo_reference_attention_fp16");
}

TEST(AttentionRuntime, SizesOfAnInputSetAndOfTheTensors) {
  const FamilyRuntime& r = attention::runtime();
  // Q and O of 1x2x100x64, K and V of 1x2x300x64, two bytes an element.
  const Problem s = problem("1x2x100x300x64:bf16");
  EXPECT_EQ(r.input_set_bytes(s), (2 * 12800 + 2 * 38400) * 2);
  EXPECT_DOUBLE_EQ(r.elements(s), 2.0 * 12800 + 2.0 * 38400);
}

TEST(AttentionRuntime, TheHardInputIsScoresGrowingAlongTheKeys) {
  EXPECT_EQ(attention::runtime().hard_inputs(), std::vector<std::string>{"on scores that grow along the keys"});
}

// The seeds and inputs the gates drew before the interface, for run seed 0x1234567890abcdef:
// checks 0 (first launch), 1 (re-check), 2 (growing scores) and 1000 (timing).
TEST(AttentionRuntime, DrawsTheInputsItDrewBefore) {
  struct Pin {
    const char* shape;
    int check;
    uint64_t seed, q, k, v, growing_k;
  };
  const Pin pins[] = {
      {"1x4x1000x64:causal", 0, 0x22ae9951024d0c33ull, 0x08829ba15d7232bdull, 0xbf78b6d562f55f26ull,
       0xe596a1b7bda5e4b8ull, 0x74283f7dbcbfcb8bull},
      {"1x4x1000x64:causal", 1, 0x22ae9851024d0a80ull, 0x069f8026860edbcaull, 0x2a0d3b144e177b0eull,
       0xe633027ec554b55eull, 0xc55216d975463492ull},
      {"1x4x1000x64:causal", 2, 0x22ae9b51024d0f99ull, 0xc29ea6a7740c7244ull, 0x37b36e932cb7d665ull,
       0xa9232918289a4b49ull, 0x094a8d0c461c1838ull},
      {"1x4x1000x64:causal", 1000, 0x22ab81510247ca6bull, 0xeeb8f45b30a1166full, 0x83aea1efb7970039ull,
       0x76f40277825c500full, 0x4976119bd52c1a5full},
      {"2x3x300x128:bf16", 0, 0xbc65dec90211ce20ull, 0x918e226c3d9d7362ull, 0x7b8db6100282b51dull,
       0x6cb05409681a2d1cull, 0xfa4589547ee0b56cull},
      {"2x3x300x128:bf16", 2, 0xbc65e0c90211d186ull, 0x0a57bd3eb92453ecull, 0x77f21b6418075958ull,
       0xeae9943f8d809858ull, 0x2248e544154d2e3cull},
      {"1x2x77x33x64", 1000, 0xefec9f40dcdf20d2ull, 0x4c6d04135bfe09faull, 0x052c513ad7817ea6ull,
       0x45646a680397af14ull, 0xc8b3b5b4e519600bull},
  };
  const FamilyRuntime& r = attention::runtime();
  for (const Pin& p : pins) {
    const Problem s = problem(p.shape);
    const uint64_t seed = cuda::check_seed(0x1234567890abcdefull, r.seed_words(s), p.check);
    EXPECT_EQ(seed, p.seed) << p.shape << " check " << p.check;
    EXPECT_EQ(fnv_of(attention::draw_tensor(s, seed, 'q', 0)), p.q) << p.shape << " check " << p.check;
    EXPECT_EQ(fnv_of(attention::draw_tensor(s, seed, 'k', 0)), p.k) << p.shape << " check " << p.check;
    EXPECT_EQ(fnv_of(attention::draw_tensor(s, seed, 'v', 0)), p.v) << p.shape << " check " << p.check;
    EXPECT_EQ(fnv_of(attention::draw_tensor(s, seed, 'k', 1)), p.growing_k) << p.shape << " check " << p.check;
    // Only K grows.
    EXPECT_EQ(fnv_of(attention::draw_tensor(s, seed, 'q', 1)), p.q);
  }
}

TEST(AttentionRuntime, AnUnknownTensorOrDrawIsRefused) {
  const Problem s = problem("1x1x8x64");
  EXPECT_THROW(attention::draw_tensor(s, 1, 'o', 0), std::invalid_argument);
  EXPECT_THROW(attention::draw_tensor(s, 1, 'k', 2), std::invalid_argument);
  EXPECT_THROW(attention::draw_tensor(s, 1, 'k', -1), std::invalid_argument);
}

// Two problems one kernel serves (same head dim, causality and dtype) get the same small problems;
// any other gets others, each small in batch and heads and several tiles long.
TEST(AttentionRuntime, SanitizerProblemsFollowTheKernel) {
  const FamilyRuntime& r = attention::runtime();
  const auto a = r.sanitizer_problems(problem("2x8x512x64:causal"));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].text(), "1x2x1152x64:causal");
  EXPECT_EQ(a[1].text(), "1x2x300x64:causal");
  EXPECT_EQ(r.sanitizer_problems(problem("16x16x4096x64:causal")), a);
  EXPECT_NE(r.sanitizer_problems(problem("2x8x512x64")), a);
  EXPECT_NE(r.sanitizer_problems(problem("2x8x512x128:causal")), a);
  const auto bf16 = r.sanitizer_problems(problem("2x8x512x64:causal:bf16"));
  ASSERT_EQ(bf16.size(), 2u);
  EXPECT_EQ(bf16[1].text(), "1x2x300x64:causal:bf16");
}

}  // namespace
}  // namespace evo
