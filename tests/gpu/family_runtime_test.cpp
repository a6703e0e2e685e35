// The families' runtimes on the host, no GPU needed: the registry, and attention's inputs, seeds,
// sizes, reference kernel names and sanitizer problems. The pinned values are what the gates drew
// before the family runtime existed (worker/cuda/shape_gates.cpp then): a change to them changes
// every stored result's inputs, so it must be deliberate.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/fp8.h"
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
  // e4m3: the float one, over the values the bytes stand for.
  EXPECT_EQ(r.reference_kernel(problem("1x8x512x64:e4m3")), "evo_reference_attention_fp32");
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

// e4m3: Q and K a byte an element, V^T's rows padded to 16 bytes, O bf16.
TEST(AttentionRuntime, AnE4m3InputSetHoldsBytesAPaddedVAndABf16Output) {
  const FamilyRuntime& r = attention::runtime();
  const Problem s = problem("1x2x100x300x64:e4m3");
  EXPECT_EQ(r.input_set_bytes(s), 12800 * (1 + 2) + 38400 + 2 * 64 * 304);
}

// The scale rule (fp8.h): the largest magnitude over 448; 1 for zeros; never below 2^-126; NaN for
// NaN or an infinity.
TEST(E4m3Scale, ThePerHeadRuleAndItsEdges) {
  EXPECT_EQ(e4m3_scale(448.f), 1.f);
  EXPECT_EQ(e4m3_scale(1.f), 1.f / 448);
  EXPECT_EQ(e4m3_scale(0.f), 1.f) << "the predecessor's zero-input bug";
  EXPECT_EQ(e4m3_scale(1e-40f), kE4m3MinScale);
  EXPECT_GT(e4m3_scale(1e-40f), 0.f);
  EXPECT_TRUE(std::isnan(e4m3_scale(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(e4m3_scale(std::nanf(""))));
  EXPECT_EQ(e4m3_vt_pitch(1), 16);
  EXPECT_EQ(e4m3_vt_pitch(16), 16);
  EXPECT_EQ(e4m3_vt_pitch(4097), 4112);
}

// V^T's key order: within each 16 keys, column 4q + i holds key 2q + (i & 1) + 8 (i >> 1), the
// order of the scores' fragment (lane q: keys 2q, 2q+1, 2q+8, 2q+9); a permutation of each 16.
TEST(E4m3VtColumn, EachSixteenKeysInTheScoresFragmentsOrder) {
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(e4m3_vt_column(2 * q + (i & 1) + 8 * (i >> 1)), 4 * q + i) << q << " " << i;
  for (long long group : {0LL, 16LL, 4096LL}) {
    std::vector<bool> seen(16, false);
    for (long long k = group; k < group + 16; ++k) {
      const long long c = e4m3_vt_column(k);
      ASSERT_GE(c, group);
      ASSERT_LT(c, group + 16);
      EXPECT_FALSE(seen[size_t(c - group)]) << k;
      seen[size_t(c - group)] = true;
    }
  }
  EXPECT_EQ(e4m3_vt_column(2), 4);
  EXPECT_EQ(e4m3_vt_column(8), 2);
  EXPECT_EQ(e4m3_vt_column(15), 15);
}

// Host quantization as the exported quantizer does it: one scale per slice, the largest value at
// 448, an all-zero slice at scale 1 and zeros, a NaN slice NaN throughout, one huge outlier
// flattening the rest of its slice to zeros and e4m3's smallest steps, V's layout transposed with
// its pad zero.
TEST(E4m3Quantize, ScalesPerSliceAndTransposesV) {
  const int rows = 3, cols = 2;
  std::vector<float> v = {1, -2, 3, -4, 0.5f, 4,       // slice 0: largest 4
                          0, 0, 0, 0, 0, 0,            // slice 1: zeros
                          1, std::nanf(""), 1, 1, 1, 1,  // slice 2: a NaN
                          1e6f, 1, 1, 1, 1, 1};        // slice 3: an outlier
  const attention::Fp8Tensor t = attention::quantize_e4m3(v, 4, rows, cols, false);
  ASSERT_EQ(t.scales.size(), 4u);
  EXPECT_EQ(t.scales[0], 4.f / 448);
  EXPECT_EQ(t.scales[1], 1.f);
  EXPECT_TRUE(std::isnan(t.scales[2]));
  EXPECT_EQ(t.scales[3], 1e6f / 448);
  EXPECT_EQ(t.bytes[5], 0x7E) << "the largest value maps to 448";
  EXPECT_EQ(t.bytes[3], 0xFE);
  EXPECT_FLOAT_EQ(t.values[5], 4.f);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(t.bytes[size_t(i)], 0) << i;
  EXPECT_EQ(t.values[6], 0.f);
  EXPECT_TRUE(std::isnan(t.values[12]));
  EXPECT_FLOAT_EQ(t.values[18], 1e6f);
  EXPECT_EQ(t.values[19], 0.f) << "1 under a scale of 1e6/448 is below e4m3's smallest step";
  // Transposed: slice s, column c, row r at (s * cols + c) * 16 + e4m3_vt_column(r); row 2 in
  // column 4.
  const attention::Fp8Tensor vt = attention::quantize_e4m3(v, 4, rows, cols, true);
  ASSERT_EQ(vt.bytes.size(), size_t(4 * cols * 16));
  EXPECT_EQ(vt.bytes[0 * 16 + 4], t.bytes[4]);   // slice 0, col 0, row 2
  EXPECT_EQ(vt.bytes[1 * 16 + 4], t.bytes[5]);   // slice 0, col 1, row 2
  EXPECT_EQ(vt.bytes[1 * 16 + 1], t.bytes[3]);   // slice 0, col 1, row 1
  EXPECT_EQ(vt.bytes[1 * 16 + 2], 0) << "pad (key 8)";
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(vt.values[i], t.values[i]) << "the values keep the untransposed layout";
  EXPECT_THROW(attention::quantize_e4m3(v, 3, rows, cols, false), std::invalid_argument);
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
