// Runs the real evo-worker binary and checks exit codes and the one stderr line of each bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "attention/dtype.h"
#include "search_space.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

Result run_worker(const std::string& args) {
  static test::TempDir cache;
  const std::string cmd = "EVO_CACHE_DIR='" + cache.path() + "' '" EVO_WORKER_BINARY "' " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void expect_one_line_error(const std::string& args, const std::string& needle) {
  const Result r = run_worker(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "expected exactly one line:\n" << r.out;
}

TEST(EvalCommand, UnknownSeed) {
  expect_one_line_error("eval --seed nope --genome '' --backend model", "unknown seed 'nope'");
}
TEST(EvalCommand, MalformedGenome) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome 'BLOCK_M' --backend model", "malformed genome");
}
TEST(EvalCommand, GeneOutOfDomain) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome 'BLOCK_M=7' --backend model",
                        "BLOCK_M=7 is outside its domain");
}
TEST(EvalCommand, UnknownGene) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome 'TILE=7' --backend model", "unknown gene 'TILE'");
}
TEST(EvalCommand, UnsupportedHeadDim) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --shape 1x8x512x96 --backend model",
                        "shape '1x8x512x96': head_dim 96 is not served by fa_s512_v3 (it serves 64, 128)");
}
TEST(EvalCommand, UnknownDtype) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --dtype fp8 --backend model",
                        "unknown dtype 'fp8': expected fp16, bf16 or e4m3");
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --shape 1x8x512x64:fp8 --backend model",
                        "unknown dtype 'fp8' in shape '1x8x512x64:fp8': expected fp16, bf16 or e4m3");
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --dtype", "--dtype needs a value");
}
// --dtype applies to shapes without a dtype suffix; one the template does not serve is one line,
// and one it serves is evaluated (the model evaluator prices bf16 as fp16).
TEST(EvalCommand, DtypeOfTheShapesIsCheckedAgainstTheTemplate) {
  const auto& served = SearchSpace::for_template("fa_s512_v3").served().at("DTYPE");
  if (std::find(served.begin(), served.end(), static_cast<int64_t>(DType::kBF16)) == served.end()) {
    expect_one_line_error("eval --seed fa_s512_v3 --genome '' --dtype bf16 --backend model",
                          "shape '1x8x512x64': dtype bf16 is not served by fa_s512_v3 (it serves fp16)");
    return;
  }
  const Result r = run_worker("eval --seed fa_s512_v3 --genome '' --dtype bf16 --backend model");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("shape     1x8x512x64:bf16:"), std::string::npos) << r.out;
}
TEST(EvalCommand, MalformedShape) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --shape 1x8x512 --backend model",
                        "malformed shape '1x8x512'");
}
TEST(EvalCommand, CausalWithMoreQueriesThanKeys) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --shape 1x8x512x256x64:causal --backend model",
                        "causal needs seq_q <= seq_k");
}
TEST(EvalCommand, UnknownBackend) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --backend tpu", "unknown backend 'tpu'");
}
TEST(EvalCommand, UnknownModelArch) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --backend model --arch sm_75",
                        "no device model for arch 'sm_75'");
}
TEST(EvalCommand, MissingSeed) { expect_one_line_error("eval --genome ''", "--seed is required"); }
TEST(EvalCommand, UnknownOption) {
  expect_one_line_error("eval --seed fa_s512_v3 --genome '' --frobnicate", "unknown option '--frobnicate'");
}
// On a machine without a GPU (CI) the cuda backend must say so in one line; on a GPU host this
// test is skipped.
TEST(EvalCommand, CudaBackendWithoutGpu) {
  if (std::system("nvidia-smi -L >/dev/null 2>&1") == 0) GTEST_SKIP() << "a GPU is present";
  const Result r = run_worker("eval --seed fa_s512_v3 --genome '' --backend cuda");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(r.out.find("no GPU") != std::string::npos ||
              r.out.find("no cuda evaluator") != std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
}
TEST(EvalCommand, InvalidGenomeFailsTheValidGateWithExit1) {
  const Result r = run_worker("eval --seed fa_s512_v3 --genome 'BLOCK_M=16,WARPS=8' --backend model");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("INVALID: violates kv_split_keeps_mma_k"), std::string::npos) << r.out;
}
TEST(EvalCommand, WgmmaGenomeForAnotherArchitectureIsInvalidBeforeCompiling) {
  const Result r = run_worker(
      "eval --seed fa_s512_v3 --genome 'BLOCK_M=64,BLOCK_N=128,WGMMA=1' --backend model --arch sm_80");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("INVALID: violates wgmma_needs_sm90a"), std::string::npos) << r.out;
}
TEST(EvalCommand, ModelBackendPrintsAnEstimatedEvaluationAsJson) {
  if (find_template("fa_s512_v3")->source.size() < 200)
    GTEST_SKIP() << "fa_s512_v3.cuh is still a placeholder";
  const Result r = run_worker("eval --seed fa_s512_v3 --genome 'BLOCK_M=64' --backend model --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"status\": \"OK\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"estimated\": true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"deviceClass\": \"sm_90a/model/estimated\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"stackFrameBytes\": 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"medianUs\""), std::string::npos) << r.out;
}

// Genome text from before the SCHEDULE gene reads as the schedule it names.
TEST(EvalCommand, OldGenomeTextIsTranslated) {
  const Result r = run_worker(
      "eval --seed fa_s512_v3 --genome 'BLOCK_M=64,BLOCK_N=128,WGMMA=1,TMA=1' --backend model --arch sm_80");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("INVALID: violates wgmma_needs_sm90a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(",SCHEDULE=tma,"), std::string::npos) << r.out;
  expect_one_line_error("eval --seed fa_s512_v3 --genome 'CP_ASYNC=0,TMA=1' --backend model",
                        "no SCHEDULE matches the retired genes CP_ASYNC=0,PV_ASYNC=0,TMA=1");
}

TEST(EvalCommand, ModelBackendPrintsEachShapeAsItWasTyped) {
  const Result r = run_worker(
      "eval --seed fa_s512_v3 --genome '' --backend model --shape 2x8x512x64 --shape 1x4x1000x512x64");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\nshape     2x8x512x64: median "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nshape     1x4x1000x512x64: median "), std::string::npos) << r.out;
}

TEST(EvalCommand, HelpTellsTheFlags) {
  const Result r = run_worker("eval --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--seed", "--genome", "--shape", "--causal", "--backend", "--arch",
                           "--sanitize", "--json", "--cache-dir"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace evo
