// Planted faults through the same compiler, gates and child as a real candidate. After each one
// the default genome must still pass: the evaluator (the daemon's) process survives everything.
#include <gtest/gtest.h>

#include <chrono>

#include "attention/tolerances.h"
#include "device_probe.h"
#include "gpu_test_support.h"
#include "sanitizer_gate.h"
#include "search_space.h"

namespace evo {
namespace {

using testing_gpu::problem;

using testing_gpu::planted_kernel;
using testing_gpu::shared_evaluator;

const std::vector<Problem>& planted_shapes() {
  static const std::vector<Problem> s = {problem("1x8x512x64"), problem("1x4x1000x64")};
  return s;
}

const v1::GateVerdict& gate(const v1::Evaluation& e, v1::Gate kind) {
  for (const auto& g : e.gates())
    if (g.kind() == kind) return g;
  static const v1::GateVerdict missing;
  return missing;
}

void expect_default_genome_still_passes() {
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const v1::Evaluation e =
      shared_evaluator()->evaluate(space.default_genome(), {problem("1x8x512x64")}, false);
  EXPECT_EQ(e.status(), v1::OK) << "after a planted fault: " << e.message();
}

TEST(PlantedKernels, CorrectControlPasses) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("naive_correct.cu", "naive_correct"), planted_shapes(), false);
  EXPECT_EQ(e.status(), v1::OK) << e.message();
  EXPECT_EQ(gate(e, v1::GATE_CORRECT).outcome(), v1::VERDICT_PASSED);
}

// bf16 through the whole gate: bf16 inputs, the bf16 reference, bf16 outputs read back and held
// to bf16's tolerance. A kernel of the right element type passes, causal and not.
TEST(PlantedKernels, Bf16ControlPassesAgainstTheBf16Reference) {
  EVO_REQUIRE_GPU();
  std::vector<Problem> shapes;
  for (const char* text : {"1x8x512x64:bf16", "1x4x1000x64:bf16", "2x8x512x64:causal:bf16"})
    shapes.push_back(problem(text));
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      testing_gpu::planted_dtype_kernel("naive_correct.cu", "naive_correct_dtype"), shapes, false);
  ASSERT_EQ(e.status(), v1::OK) << e.message();
  ASSERT_EQ(e.shapes_size(), 3);
  for (const auto& s : e.shapes()) {
    EXPECT_EQ(s.shape().dtype(), v1::DTYPE_BF16);
    EXPECT_LE(s.rel_l2_error(), attention::kBf16Tolerance.max_rel_l2_error);
    EXPECT_GT(s.rel_l2_error(), 0.0) << "bf16 outputs are rounded: exactly zero error means fp32 was compared";
  }
}

// The same kernel compiled for fp16 and handed bf16 tensors reads every element wrong: the gate
// must say so, naming the bf16 shape.
TEST(PlantedKernels, AnFp16KernelOnBf16InputsIsIncorrect) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("naive_correct.cu", "naive_correct"), {problem("1x8x512x64:bf16")}, false);
  EXPECT_EQ(e.status(), v1::INCORRECT) << e.message();
  EXPECT_NE(e.message().find("1x8x512x64:bf16"), std::string::npos) << e.message();
  expect_default_genome_still_passes();
}

TEST(PlantedKernels, WrongOutputIsIncorrect) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("wrong_output.cu", "wrong_output"), planted_shapes(), false);
  EXPECT_EQ(e.status(), v1::INCORRECT) << e.message();
  EXPECT_EQ(gate(e, v1::GATE_CORRECT).outcome(), v1::VERDICT_FAILED);
  EXPECT_EQ(gate(e, v1::GATE_TIMED).outcome(), v1::VERDICT_NOT_RUN);
  EXPECT_NE(e.message().find("1x8x512x64"), std::string::npos) << e.message();
  expect_default_genome_still_passes();
}

// Right on uniform inputs, wrong once a row's max rises by more than 2^8 after its first tile:
// only the growing-scores check can tell.
TEST(PlantedKernels, RescaleThatForgetsTheOutputIsIncorrectWhereScoresGrow) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("lazy_rescale_forgets_output.cu", "lazy_rescale_forgets_output"),
      planted_shapes(), false);
  EXPECT_EQ(e.status(), v1::INCORRECT) << e.message();
  EXPECT_NE(e.message().find("on scores that grow along the keys"), std::string::npos)
      << e.message();
  expect_default_genome_still_passes();
}

TEST(PlantedKernels, HangIsATimeoutWithinTheWatchdog) {
  EVO_REQUIRE_GPU();
  EvaluatorOptions options;
  options.timeout_ms = 4000;
  CudaEvaluator ev(options, cuda::probe_device(0));
  const auto start = std::chrono::steady_clock::now();
  const v1::Evaluation e = ev.evaluate_source(planted_kernel("hang.cu", "hang"), planted_shapes(), false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(e.status(), v1::TIMEOUT) << e.message();
  // The watchdog is the base plus an allowance that grows with the shapes' tensors.
  const int watchdog_ms = watchdog_ms_for(4000, planted_shapes());
  EXPECT_GT(watchdog_ms, 4000);
  EXPECT_EQ(e.message(), "timeout: no result after " + std::to_string(watchdog_ms) + " ms");
  EXPECT_LT(ms, 4000 + 30000) << "compile plus watchdog took too long";
  expect_default_genome_still_passes();
}

TEST(PlantedKernels, FarOutOfBoundsWriteIsACrash) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("far_out_of_bounds.cu", "far_out_of_bounds"), planted_shapes(), false);
  EXPECT_EQ(e.status(), v1::CRASH) << e.message();
  EXPECT_NE(e.message().find("cudaError"), std::string::npos) << e.message();
  expect_default_genome_still_passes();
}

// One gate process serves evaluation after evaluation; a candidate that poisons its CUDA context
// ends it, and the next evaluation gets a new one that passes.
TEST(PlantedKernels, OneGateProcessServesManyEvaluationsUntilACrashEndsIt) {
  EVO_REQUIRE_GPU();
  CudaEvaluator ev(EvaluatorOptions(), cuda::probe_device(0));
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(ev.evaluate(space.default_genome(), {problem("1x8x512x64")}, false).status(), v1::OK);
  EXPECT_EQ(ev.gate_process_starts(), 1);
  const v1::Evaluation crash =
      ev.evaluate_source(planted_kernel("far_out_of_bounds.cu", "far_out_of_bounds"), planted_shapes(), false);
  EXPECT_EQ(crash.status(), v1::CRASH) << crash.message();
  const v1::Evaluation after = ev.evaluate(space.default_genome(), {problem("1x8x512x64")}, false);
  EXPECT_EQ(after.status(), v1::OK) << after.message();
  EXPECT_EQ(ev.gate_process_starts(), 2);
  EvaluatorOptions fresh;
  fresh.child_per_evaluation = true;
  CudaEvaluator per_evaluation(fresh, cuda::probe_device(0));
  EXPECT_EQ(per_evaluation.evaluate(space.default_genome(), {problem("1x8x512x64")}, false).status(), v1::OK);
  EXPECT_EQ(per_evaluation.gate_process_starts(), -1);
}

TEST(PlantedKernels, OffByOneWriteIsASanitizerError) {
  EVO_REQUIRE_GPU();
  if (cuda::find_compute_sanitizer().empty()) GTEST_SKIP() << "compute-sanitizer not found";
  const v1::Evaluation e = shared_evaluator()->evaluate_source(
      planted_kernel("off_by_one_write.cu", "off_by_one_write"), {problem("1x8x512x64")}, true);
  // Without the sanitizer it may pass; with it, memcheck must name the write (a crash also counts).
  EXPECT_TRUE(e.status() == v1::SANITIZER_ERROR || e.status() == v1::CRASH) << e.message();
  if (e.status() == v1::SANITIZER_ERROR) {
    EXPECT_NE(gate(e, v1::GATE_SANITIZER).detail().find("memcheck"), std::string::npos)
        << gate(e, v1::GATE_SANITIZER).detail();
  }
  expect_default_genome_still_passes();
}

TEST(PlantedKernels, SpillIsAResourceReject) {
  EVO_REQUIRE_GPU();
  const v1::Evaluation e = shared_evaluator()->evaluate_source(planted_kernel("spill.cu", "spill"),
                                                               planted_shapes(), false);
  EXPECT_EQ(e.status(), v1::RESOURCE_REJECT) << e.message();
  EXPECT_GT(e.resources().stack_frame_bytes() + e.resources().spill_store_bytes(), 0);
  EXPECT_EQ(gate(e, v1::GATE_CORRECT).outcome(), v1::VERDICT_NOT_RUN);
  expect_default_genome_still_passes();
}

// A candidate whose launch needs more than the card has -- global memory for its workspace, or
// shared memory per block -- is refused with a status, and the worker goes on.
TEST(PlantedKernels, MoreGlobalMemoryThanTheCardHasIsReportedNotFatal) {
  EVO_REQUIRE_GPU();
  SourceKernel k = planted_kernel("naive_correct.cu", "naive_correct");
  const int64_t too_much = 2 * shared_evaluator()->device().global_mem_bytes() + (1ll << 30);
  const auto base_launch = k.launch;
  k.launch = [base_launch, too_much](const Problem& s) {
    LaunchConfig l = base_launch(s);
    l.workspace_bytes = too_much;
    return l;
  };
  const v1::Evaluation e = shared_evaluator()->evaluate_source(k, {problem("1x8x512x64")}, false);
  EXPECT_EQ(e.status(), v1::CRASH) << e.message();
  EXPECT_NE(e.message().find("out of memory"), std::string::npos) << e.message();
  expect_default_genome_still_passes();
}

TEST(PlantedKernels, MoreSharedMemoryThanTheCardHasIsRefused) {
  EVO_REQUIRE_GPU();
  SourceKernel k = planted_kernel("naive_correct.cu", "naive_correct");
  const int64_t too_much = shared_evaluator()->device().smem_per_block_optin() + 1024;
  const auto base_launch = k.launch;
  k.launch = [base_launch, too_much](const Problem& s) {
    LaunchConfig l = base_launch(s);
    l.smem_bytes = too_much;
    return l;
  };
  const v1::Evaluation e = shared_evaluator()->evaluate_source(k, {problem("1x8x512x64")}, false);
  EXPECT_TRUE(e.status() == v1::RESOURCE_REJECT || e.status() == v1::CRASH) << e.message();
  EXPECT_EQ(gate(e, v1::GATE_TIMED).outcome(), v1::VERDICT_NOT_RUN);
  expect_default_genome_still_passes();
}

}  // namespace
}  // namespace evo
