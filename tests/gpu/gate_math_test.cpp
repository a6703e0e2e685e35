// The gates' host arithmetic: poison and NaN counting, error figures, percentiles, rotation; and
// the attention family's host side of them (element bits, outputs read as floats, tolerances).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attention/element_bits.h"
#include "attention/runtime.h"
#include "attention/tolerances.h"
#include "cuda_evaluator.h"
#include "family_runtime.h"
#include "gate_math.h"
#include "gpu_test_support.h"

namespace evo::cuda {
namespace {

using namespace evo::attention;
using testing_gpu::problem;

// Attention's tolerance for a shape, as the gate asks for it.
Tolerance tolerance_of(const Problem& s) { return runtime_for(s).tolerance(s); }

TEST(Watchdog, BaseForSmallShapesAndAnAllowanceThatGrowsWithTheTensors) {
  const int small = watchdog_ms_for(10000, {problem("1x8x512x64")});
  EXPECT_GE(small, 10000);
  EXPECT_LT(small, 10500);  // 1x8x512x64: 1M elements, 0.1 s
  const int big = watchdog_ms_for(10000, {problem("2x16x4096x128"), problem("2x16x4096x128:causal")});
  EXPECT_GT(big, 20000);  // 134M elements: 13 s on top of the base
  EXPECT_LT(big, 30000);
}

TEST(Fp16Host, RoundTripsExactValuesAndSpecials) {
  for (float f : {0.f, 1.f, -1.f, 0.5f, 65504.f, -2.f, 0.000061035156f /* 2^-14 */,
                  0.000000059604645f /* 2^-24, smallest subnormal */})
    EXPECT_EQ(half_bits_to_float(float_to_half_bits(f)), f) << f;
  EXPECT_EQ(float_to_half_bits(1.f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-2.f), 0xC000);
  EXPECT_EQ(float_to_half_bits(1e6f), 0x7C00);  // overflow to infinity
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::nanf("")))));
  // Round to nearest even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(float_to_half_bits(1.f + 1.f / 2048), 0x3C00);
  EXPECT_EQ(float_to_half_bits(1.f + 3.f / 2048), 0x3C02);
}

TEST(Bf16Host, RoundTripsExactValuesAndRoundsToNearestEven) {
  for (float f : {0.f, 1.f, -1.f, 0.5f, -2.f, 1.5f, 0.15625f, 0x1p-126f /* smallest normal */})
    EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(f)), f) << f;
  EXPECT_EQ(float_to_bf16_bits(1.f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(3.4e38f), 0x7F80);  // rounds past the largest finite: infinity
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  // 8 significant bits: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7; ties go to the even one.
  EXPECT_EQ(float_to_bf16_bits(1.f + 1.f / 256), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.f + 3.f / 256), 0x3F82);
  EXPECT_EQ(float_to_bf16_bits(1.f + 1.f / 256 + 1.f / 4096), 0x3F81);  // past halfway: up
  EXPECT_EQ(float_to_bits(DType::kBF16, 1.f), 0x3F80);
  EXPECT_EQ(float_to_bits(DType::kF16, 1.f), 0x3C00);
  EXPECT_EQ(bits_to_float(DType::kBF16, 0x4040), 3.f);
}

// e4m3 ("fn": no infinities, NaN only at S.1111.111): every code widens to its value and rounds
// back to itself; ties go to even; beyond 448 saturates; below 2^-6 steps of 2^-9.
TEST(ElementBits, E4m3RoundTripsEveryCodeAndRoundsToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_bits_to_float(static_cast<uint8_t>(b));
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(f)) << b;
      continue;
    }
    if (b == 0x80) continue;  // -0 rounds to -0, the same code
    ASSERT_EQ(float_to_e4m3_bits(f), b) << b << " " << f;
  }
  EXPECT_EQ(e4m3_bits_to_float(0x7E), 448.f);
  EXPECT_EQ(e4m3_bits_to_float(0x08), 1.f / 64);   // smallest normal
  EXPECT_EQ(e4m3_bits_to_float(0x01), 1.f / 512);  // smallest subnormal
  EXPECT_EQ(e4m3_bits_to_float(0x38), 1.f);
  EXPECT_EQ(float_to_e4m3_bits(1.f + 1.f / 16), 0x38);        // halfway between 1 and 1.125: even
  EXPECT_EQ(float_to_e4m3_bits(1.f + 3.f / 16), 0x3A);        // halfway between 1.125 and 1.25: even
  EXPECT_EQ(float_to_e4m3_bits(1.f + 1.f / 16 + 1e-6f), 0x39);  // past halfway: up
  EXPECT_EQ(float_to_e4m3_bits(1.5f / 512), 0x02);             // subnormal tie: even
  EXPECT_EQ(float_to_e4m3_bits(1e-4f), 0x00);
  EXPECT_EQ(float_to_e4m3_bits(-1e-4f), 0x80);
  EXPECT_EQ(float_to_e4m3_bits(460.f), 0x7E);  // saturates
  EXPECT_EQ(float_to_e4m3_bits(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3_bits(-1e30f), 0xFE);
  EXPECT_EQ(float_to_e4m3_bits(std::nanf("")), 0x7F);
  EXPECT_EQ(float_to_e4m3_bits(0.0150f), 0x08);  // just below 2^-6 rounds up into the normals
}

// The poison, bytes of kPoisonByte, is a NaN in both element types, so an unwritten element never
// reads as a value; and no element of either widens to the float that marks it unwritten.
TEST(ElementBits, PoisonIsANaNInEveryDtype) {
  const uint16_t poison = static_cast<uint16_t>((kPoisonByte << 8) | kPoisonByte);  // cudaMemset writes bytes
  EXPECT_TRUE(std::isnan(half_bits_to_float(poison)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(poison)));
  EXPECT_TRUE(std::isnan(unwritten_output()));
  EXPECT_TRUE(is_unwritten_output(unwritten_output()));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    ASSERT_FALSE(is_unwritten_output(half_bits_to_float(static_cast<uint16_t>(b)))) << b;
    ASSERT_FALSE(is_unwritten_output(bf16_bits_to_float(static_cast<uint16_t>(b)))) << b;
  }
}

// The output read back: the poison becomes the unwritten mark, anything else the value of the
// problem's dtype (bf16 bits read as fp16 would be other numbers).
TEST(AttentionOutput, ReadsTheProblemsDtypeAndMarksThePoison) {
  const uint16_t poison = static_cast<uint16_t>((kPoisonByte << 8) | kPoisonByte);
  const std::vector<uint16_t> bits = {float_to_bf16_bits(1.f), float_to_bf16_bits(-3.f), 0x7F80 /* +inf */, poison};
  const std::vector<float> bf16 = output_as_floats(problem("1x1x2x2:bf16"), bits);
  ASSERT_EQ(bf16.size(), 4u);
  EXPECT_EQ(bf16[0], 1.f);
  EXPECT_EQ(bf16[1], -3.f);
  EXPECT_TRUE(std::isinf(bf16[2]));
  EXPECT_TRUE(is_unwritten_output(bf16[3]));
  const std::vector<float> fp16 = output_as_floats(problem("1x1x2x2"), bits);
  EXPECT_NE(fp16[0], 1.f) << "the same bits read as fp16";
  EXPECT_TRUE(is_unwritten_output(fp16[3]));
  const ErrorFigures f = compare_with_reference(bf16, {1.f, -3.f, 0.5f, 2.f});
  EXPECT_EQ(f.nonfinite, 1);
  EXPECT_EQ(f.unwritten, 1);
  EXPECT_DOUBLE_EQ(f.max_abs_error, 0.0);
}

TEST(CompareWithReference, CountsUnwrittenAndNonFiniteSeparately) {
  const std::vector<float> ref = {1.f, 2.f, 3.f, 4.f};
  const std::vector<float> out = {1.f, unwritten_output(), std::numeric_limits<float>::infinity(), 4.f};
  const ErrorFigures f = compare_with_reference(out, ref);
  EXPECT_EQ(f.unwritten, 1);
  EXPECT_EQ(f.nonfinite, 1);
  EXPECT_DOUBLE_EQ(f.max_abs_error, 0.0);
  ASSERT_TRUE(correctness_failure(f, "1x8x512x64", kFp16Tolerance, "on the first launch").has_value());
  EXPECT_NE(correctness_failure(f, "1x8x512x64", kFp16Tolerance, "x")->find("never written"), std::string::npos);
  // Any other NaN is a value the kernel wrote.
  const ErrorFigures nan = compare_with_reference({std::nanf("")}, {1.f});
  EXPECT_EQ(nan.nonfinite, 1);
  EXPECT_EQ(nan.unwritten, 0);
}

TEST(CompareWithReference, RelativeL2AndMaxAbs) {
  const std::vector<float> ref = {3.f, 4.f};  // norm 5
  const std::vector<float> out = {3.f, 4.5f};
  const ErrorFigures f = compare_with_reference(out, ref);
  EXPECT_NEAR(f.rel_l2_error, 0.1, 1e-9);
  EXPECT_NEAR(f.max_abs_error, 0.5, 1e-9);
  const auto why = correctness_failure(f, "1x4x1000x64", tolerance_of(problem("1x4x1000x64")),
                                       "after 64 back-to-back launches");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("1x4x1000x64"), std::string::npos) << *why;
  EXPECT_NE(why->find("relative L2 error"), std::string::npos) << *why;
  EXPECT_NE(why->find("after 64 back-to-back launches"), std::string::npos) << *why;
}

TEST(CompareWithReference, ShortOutputCountsAsUnwritten) {
  const ErrorFigures f = compare_with_reference({1.f}, {1.f, 1.f, 1.f});
  EXPECT_EQ(f.unwritten, 2);
}

TEST(CorrectnessFailure, PassesWithinTolerance) {
  ErrorFigures f;
  f.rel_l2_error = kFp16Tolerance.max_rel_l2_error / 2;
  f.max_abs_error = kFp16Tolerance.max_abs_error / 2;
  EXPECT_FALSE(correctness_failure(f, "s", kFp16Tolerance, "").has_value());
  f.max_abs_error = kFp16Tolerance.max_abs_error * 2;
  EXPECT_TRUE(correctness_failure(f, "s", kFp16Tolerance, "").has_value());
  f.max_abs_error = std::numeric_limits<double>::quiet_NaN();  // a NaN figure never passes
  EXPECT_TRUE(correctness_failure(f, "s", kFp16Tolerance, "").has_value());
}

TEST(SummariseTimes, PercentilesOfUnsortedInput) {
  std::vector<double> t;
  for (int i = 100; i >= 0; --i) t.push_back(i);
  const TimingSummary s = summarise_times(t);
  EXPECT_DOUBLE_EQ(s.median_us, 50);
  EXPECT_DOUBLE_EQ(s.p10_us, 10);
  EXPECT_DOUBLE_EQ(s.p90_us, 90);
  EXPECT_DOUBLE_EQ(summarise_times({}).median_us, 0);
}

TEST(GeometricMean, OfMedians) {
  EXPECT_NEAR(geometric_mean({2, 8}), 4, 1e-12);
  EXPECT_EQ(geometric_mean({}), 0);
}

TEST(RotationSets, ExceedsTheLargerOfRotationAndTwiceL2) {
  const int64_t mb = 1 << 20;
  // 2 MB per set against 256 MB: more than 128 sets, so the total exceeds the target.
  EXPECT_EQ(rotation_sets(2 * mb, 256 * mb, 50 * mb, 4096), 129);
  // A large L2 dominates a small rotation target.
  EXPECT_EQ(rotation_sets(2 * mb, 8 * mb, 50 * mb, 4096), 51);
  EXPECT_EQ(rotation_sets(1024 * mb, 256 * mb, 50 * mb, 4096), 1);
  EXPECT_EQ(rotation_sets(2 * mb, 256 * mb, 50 * mb, 10), 10);  // memory caps it
}

TEST(PlanTiming, AFastKernelGetsTheFullPlan) {
  // 5 us a call, 129 input sets: ten replays of 129 launches take 7 ms, far inside 1.5 s.
  const TimingPlan p = plan_timing(5.0, 20, 129, 200, 1.5e6, 3);
  EXPECT_EQ(p.launches_per_sample, 129);
  EXPECT_EQ(p.samples, 10);
  // Fewer sets than launches per sample: the graph keeps its 20.
  EXPECT_EQ(plan_timing(5.0, 20, 4, 200, 1.5e6, 3).launches_per_sample, 20);
  // No estimate (no warm-up): the plan as asked.
  EXPECT_EQ(plan_timing(0.0, 20, 129, 200, 1.5e6, 3).samples, 10);
}

TEST(PlanTiming, ASlowKernelIsTrimmedToTheBudget) {
  // 3 ms a call (a naive kernel): the full plan would take 129 * 11 * 3 ms = 4.3 s.
  const TimingPlan p = plan_timing(3000.0, 20, 129, 200, 1.5e6, 3);
  EXPECT_EQ(p.samples, 3);
  EXPECT_EQ(p.launches_per_sample, 125);  // 4 replays of 125 launches: 1.5 s
  EXPECT_LE(3000.0 * p.launches_per_sample * (p.samples + 1), 1.5e6);
  // Slower still: the graph stops at 20 launches and the samples at three, over budget or not.
  const TimingPlan q = plan_timing(50000.0, 20, 129, 200, 1.5e6, 3);
  EXPECT_EQ(q.launches_per_sample, 20);
  EXPECT_EQ(q.samples, 3);
  // Between the two: a shorter graph, still three samples.
  const TimingPlan r = plan_timing(10000.0, 20, 129, 200, 1.5e6, 3);
  EXPECT_EQ(r.launches_per_sample, 37);
  EXPECT_EQ(r.samples, 3);
}

// bf16 is held to its own, looser bounds: a figure that fails fp16 may pass bf16, and the message
// names the shape with its dtype.
TEST(CorrectnessFailure, Bf16HasItsOwnTolerance) {
  EXPECT_GT(kBf16Tolerance.max_rel_l2_error, kFp16Tolerance.max_rel_l2_error);
  EXPECT_GT(kBf16Tolerance.max_abs_error, kFp16Tolerance.max_abs_error);
  const Problem fp16 = problem("1x4x1000x64"), bf16 = problem("1x4x1000x64:bf16");
  EXPECT_EQ(tolerance_of(fp16).max_rel_l2_error, kFp16Tolerance.max_rel_l2_error);
  EXPECT_EQ(tolerance_of(bf16).max_abs_error, kBf16Tolerance.max_abs_error);
  ErrorFigures f;
  f.rel_l2_error = kFp16Tolerance.max_rel_l2_error * 2;
  EXPECT_TRUE(correctness_failure(f, fp16.text(), tolerance_of(fp16), "").has_value());
  EXPECT_FALSE(correctness_failure(f, bf16.text(), tolerance_of(bf16), "").has_value());
  f.rel_l2_error = kBf16Tolerance.max_rel_l2_error * 2;
  const auto why = correctness_failure(f, bf16.text(), tolerance_of(bf16), "on the first launch");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("1x4x1000x64:bf16: relative L2 error"), std::string::npos) << *why;
}

}  // namespace
}  // namespace evo::cuda
