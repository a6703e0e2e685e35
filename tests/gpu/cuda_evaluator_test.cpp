// The cuda evaluator on real genomes of fa_s512_v3: correctness across the space, timing figures,
// and the sanitizer gate on the default genome.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>
#include <vector>
#include <unistd.h>

#include "device_probe.h"
#include "gpu_test_support.h"
#include "sanitizer_gate.h"
#include "search_space.h"

namespace evo {
namespace {

using testing_gpu::problem;

using testing_gpu::gate_shapes;
using testing_gpu::shared_evaluator;

std::string gate_summary(const v1::Evaluation& e) {
  std::string s;
  for (const auto& g : e.gates()) s += g.gate() + "=" + g.verdict() + " ";
  return s + "| " + e.message();
}

// Genomes of fa_s512_v3 (gene texts), each with the shapes it is held to.
using GateCases = std::vector<std::pair<const char*, const std::vector<Problem>*>>;

// Each genome through every gate at its shapes, the sanitizer's included; returns the evaluations
// for the checks a test adds.
std::vector<v1::Evaluation> expect_every_gate_passes(CudaEvaluator& ev, const GateCases& cases) {
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  std::vector<v1::Evaluation> out;
  for (const auto& [genes, shapes] : cases) {
    out.push_back(ev.evaluate(space.parse(genes), *shapes, true));
    EXPECT_EQ(out.back().status(), v1::OK) << genes << ": " << gate_summary(out.back());
  }
  return out;
}

void expect_gate_order(const v1::Evaluation& e) {
  const v1::Gate order[] = {v1::GATE_VALID,   v1::GATE_COMPILE, v1::GATE_TENSOR_CORES,
                            v1::GATE_CORRECT, v1::GATE_TIMED,   v1::GATE_SANITIZER};
  ASSERT_EQ(e.gates_size(), 6) << gate_summary(e);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(e.gates(i).kind(), order[i]);
}

// Valid genomes spread over the space: a fixed stride through the mixed-radix index, so the
// sample is the same on every run and touches every gene's values.
std::vector<Genome> spread_sample(const SearchSpace& space, const std::vector<Problem>& shapes,
                                  int64_t smem_limit, size_t want) {
  std::vector<Genome> out;
  std::set<std::string> seen;
  const uint64_t n = space.size();
  const uint64_t stride = 7919;  // prime, coprime with the space's size of small factors
  for (uint64_t step = 0; step < n && out.size() < want; ++step) {
    const Genome g = space.at((step * stride) % n);
    bool ok = true;
    for (const auto& s : shapes) ok = ok && !space.violated_constraint(g, s, smem_limit);
    if (ok && seen.insert(g.text()).second) out.push_back(g);
  }
  return out;
}

TEST(CudaEvaluator, DefaultGenomePassesEveryGateShape) {
  EVO_REQUIRE_GPU();
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const v1::Evaluation e = shared_evaluator()->evaluate(space.default_genome(), gate_shapes(), false);
  ASSERT_EQ(e.status(), v1::OK) << gate_summary(e);
  expect_gate_order(e);
  EXPECT_EQ(e.gates(3).outcome(), v1::VERDICT_PASSED);
  EXPECT_EQ(e.gates(4).outcome(), v1::VERDICT_PASSED);
  EXPECT_EQ(e.gates(5).outcome(), v1::VERDICT_NOT_RUN);
  // Each gate that ran says how long it took, and the evaluation's wall time covers them all.
  double gates_ms = 0;
  for (const auto& g : e.gates()) gates_ms += g.elapsed_ms();
  EXPECT_GT(e.gates(3).elapsed_ms(), 0);
  EXPECT_GT(e.gates(4).elapsed_ms(), 0);
  EXPECT_EQ(e.gates(5).elapsed_ms(), 0);
  EXPECT_GE(e.wall_ms(), gates_ms);
  ASSERT_EQ(e.shapes_size(), 6);
  for (const auto& s : e.shapes()) {
    EXPECT_GT(s.median_us(), 0);
    EXPECT_LE(s.p10_us(), s.median_us());
    EXPECT_GE(s.p90_us(), s.median_us());
    EXPECT_GT(s.resident_us(), 0);  // the figure with inputs left in L2, beside the fitness's
    EXPECT_GT(s.tflops(), 0);
    EXPECT_EQ(s.unwritten(), 0);
    EXPECT_EQ(s.nonfinite(), 0);
    EXPECT_GT(s.rel_l2_error(), 0);  // fp16 output is never bit-equal to the fp32 reference
  }
  EXPECT_GT(e.fitness_us(), 0);
  EXPECT_FALSE(e.estimated());
  EXPECT_EQ(e.device().backend(), "cuda");
}

// Two warpgroups, PV_ASYNC and a cluster of four: the last P*V of one warpgroup once raced the
// other's write of the cluster partials over the V stages, and 448 outputs came out NaN at
// 2,8,512,64 causal (the correctness gate caught it during a search; a barrier fixed it).
TEST(CudaEvaluator, PvAsyncWarpgroupsInAClusterFinishBeforeTheMerge) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "WGMMA genomes need sm_90a";
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const Genome g =
      space.parse("BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=2,SPLIT_KV=4,WGMMA=1,PV_ASYNC=1");
  const v1::Evaluation e =
      ev.evaluate(g, {problem("2x8x512x64:causal"), problem("1x4x1000x64:causal")}, false);
  EXPECT_EQ(e.status(), v1::OK) << gate_summary(e);
}

// TMA copies: the worker encodes tensor maps per input set; ragged tails arrive as zeros, head
// dim 128 reads two panels, and a split-KV cluster's blocks each wait on their own barriers.
// STAGE_RELEASE genomes (two warpgroups drifting apart, with and without PV_ASYNC) and PINGPONG
// ones (two warpgroups taking turns, splitting rows or keys) go through the sanitizer's racecheck
// and synccheck too, as do 32-row boxes (TMA_BOX_ROWS), two to a 64-row Q tile, whole-tile
// boxes (K and V taller than Q), one stage whose K and V are refilled apart, and scores issued a
// tile ahead (QK_AHEAD), with stages refilled behind a barrier and by the last warp out.
TEST(CudaEvaluator, TmaGenomesPassEveryGateWithTheirTensorMaps) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "TMA genomes need wgmma, on sm_90a";
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  for (const char* genes : {"BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1",
                            "BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=2,SPLIT_KV=4,WGMMA=1,TMA=1",
                            "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,TMA=1,STAGE_RELEASE=1",
                            "BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1",
                            "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1,PINGPONG=1",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1,PINGPONG=1",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1,TMA_BOX_ROWS=32",
                            "BLOCK_M=64,BLOCK_N=32,WARPS=4,STAGES=3,WGMMA=1,TMA=1,TMA_BOX_ROWS=32",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1,TMA_BOX_ROWS=256",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=1,WGMMA=1,TMA=1",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=1,WGMMA=1,TMA=1,TMA_BOX_ROWS=256",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "TMA_BOX_ROWS=32,QK_AHEAD=1",
                            "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,"
                            "STAGE_RELEASE=1,QK_AHEAD=1"}) {
    const v1::Evaluation e = ev.evaluate(
        space.parse(genes),
        {problem("1x4x1000x64:causal"), problem("1x2x300x128"), problem("2x8x512x64")},
        true);
    EXPECT_EQ(e.status(), v1::OK) << genes << ": " << gate_summary(e);
  }
}

// TMA under mma.sync: tiles in the swizzled panels, 32- and 64-row boxes, K/V boxes taller than
// Q's (64 rows, or a whole 256-key tile, over 32-row Q tiles), stages refilled behind
// a block-wide barrier only where a tile reuses one (every tile past the last stage at sequence
// 1000), head dim 128 in two panels. Through racecheck and synccheck too.
TEST(CudaEvaluator, TmaMmaSyncGenomesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "TMA genomes need sm_90a";
  const std::vector<Problem> head_dim_64 = {
      problem("1x4x1000x64:causal"), problem("1x3x500x64"), problem("2x8x512x64")};
  std::vector<Problem> both_head_dims = head_dim_64;
  both_head_dims.push_back(problem("1x2x256x128"));
  // 32x256 in three stages needs 224 KiB at head dim 128, more than an SM has.
  const GateCases cases = {
      {"BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=3,TMA=1,TMA_BOX_ROWS=32", &both_head_dims},
      {"BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=3,TMA=1,TMA_BOX_ROWS=32", &head_dim_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,TMA=1,TMA_BOX_ROWS=32", &both_head_dims},
      {"BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=3,TMA=1", &both_head_dims},
      {"BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,TMA=1,TMA_BOX_ROWS=256", &head_dim_64},
      {"BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,TMA=1", &both_head_dims}};
  expect_every_gate_passes(ev, cases);
}

// LAZY_RESCALE under mma.sync (with and without TMA; 64x64x4x2 spills 12 bytes with it under
// NVRTC and is rejected by the resource gate, so a 16-warp block stands in) and wgmma (PV_ASYNC,
// whose wait for the previous P*V every warp of the warpgroup must reach at one pc, PINGPONG at
// head dim 128, one stage, a split-KV cluster merging partials whose bases lag their maxima).
// The correctness gate's growing-scores check makes the bases rise mid-sequence, warp by warp;
// racecheck and synccheck run too, on shapes of several tiles (with the wait inside the
// rescale's branch, synccheck failed the PV_ASYNC genome here).
TEST(CudaEvaluator, LazyRescaleGenomesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const std::vector<Problem> head_dim_64 = {
      problem("1x4x1000x64:causal"), problem("1x3x500x64"), problem("2x8x512x64")};
  const std::vector<Problem> head_dim_128 = {problem("1x4x1000x128:causal"),
                                                  problem("1x2x300x128")};
  GateCases cases = {
      {"BLOCK_M=64,BLOCK_N=128,WARPS=16,STAGES=3,SWIZZLE=0,LAZY_RESCALE=1", &head_dim_64}};
  if (ev.device().arch() == "sm_90a") {
    for (const char* genes :
         {"BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,TMA=1,TMA_BOX_ROWS=32,LAZY_RESCALE=1",
          "BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,WGMMA=1,PV_ASYNC=1,TMA=1,TMA_BOX_ROWS=32,"
          "LAZY_RESCALE=1",
          "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=1,WGMMA=1,TMA=1,LAZY_RESCALE=1",
          "BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=2,SPLIT_KV=4,WGMMA=1,TMA=1,LAZY_RESCALE=1"})
      cases.emplace_back(genes, &head_dim_64);
    cases.emplace_back(
        "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,PV_ASYNC=1,TMA=1,STAGE_RELEASE=1,"
        "PINGPONG=1,TMA_BOX_ROWS=256,LAZY_RESCALE=1",
        &head_dim_128);
  }
  expect_every_gate_passes(ev, cases);
}

// CAUSAL_FOLD: blocks whose front rows come from the sequence's start and back rows from its end,
// through cp.async and TMA (two stages holding every tile at 512, three refilled at 1000), with
// LAZY_RESCALE, with four row warps, and at head dim 128; causal shapes whose length is not a
// whole number of blocks (the last half-block short or empty), and non-causal ones, which the
// gene must leave as they were. Every gate runs, the sanitizers included.
TEST(CudaEvaluator, CausalFoldGenomesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const std::vector<Problem> head_dim_64 = {
      problem("1x4x1000x64:causal"), problem("1x3x500x64:causal"),
      problem("2x8x512x64:causal"), problem("1x3x500x64")};
  const std::vector<Problem> head_dim_128 = {problem("1x2x300x128:causal"),
                                                  problem("1x4x1000x128:causal")};
  GateCases cases = {
      {"BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=4,CAUSAL_FOLD=1", &head_dim_64},
      // Three stages: with two, ptxas has compiled this block's non-causal code (1x3x500x64) to
      // 128 registers and an 8-byte spill since packed batches came in (b79e7a1), which the
      // compile gate rightly refuses (bench/NOTES.md, 2026-12-04).
      {"BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,CAUSAL_FOLD=1", &head_dim_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,CAUSAL_FOLD=1", &head_dim_128}};
  if (ev.device().arch() == "sm_90a") {
    for (const char* genes :
         {"BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,TMA=1,TMA_BOX_ROWS=32,CAUSAL_FOLD=1",
          "BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=3,TMA=1,TMA_BOX_ROWS=32,CAUSAL_FOLD=1",
          "BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,TMA=1,TMA_BOX_ROWS=32,LAZY_RESCALE=1,"
          "CAUSAL_FOLD=1"})
      cases.emplace_back(genes, &head_dim_64);
  }
  expect_every_gate_passes(ev, cases);
}

// Served-model shapes: grouped query heads (two and eight to a K/V head, and one K/V head for
// all), a KV cache's bottom-right causal diagonal (17 queries over 777 keys, 300 over 1152), and
// decode steps (one query, four queries) over long caches, through mma.sync and cp.async, a
// CAUSAL_FOLD block, a split-KV cluster, a split merged in the workspace and, on sm_90a, TMA
// with wgmma, PACK_GQA's blocks of a whole group of query heads and splits of 16 blocks.
// Every gate runs, the sanitizers included; the reference reads the same K/V head and masks the
// same diagonal.
TEST(CudaEvaluator, GroupedHeadsKvCacheAndDecodeShapesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const std::vector<Problem> shapes_64 = {
      problem("1x8x17x777x64:kv2:causal"), problem("2x8x300x1152x64:kv1:causal"),
      problem("3x16x1x1000x64:kv2"), problem("1x8x4x4097x64:kv8:causal"), problem("1x6x500x64:kv3:causal")};
  const std::vector<Problem> shapes_128 = {problem("1x8x17x777x128:kv2:causal:bf16"),
                                           problem("2x32x1x2048x128:kv8:bf16"),
                                           problem("1x4x300x1152x128:kv1:causal:bf16")};
  GateCases cases = {
      {"BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2", &shapes_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_KV=4", &shapes_64},
      {"BLOCK_M=32,BLOCK_N=128,WARPS=8,STAGES=4,CAUSAL_FOLD=1", &shapes_64},
      {"BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2", &shapes_128},
      {"BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,PACK_GQA=1", &shapes_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_KV=4,PACK_GQA=1", &shapes_128}};
  if (ev.device().arch() == "sm_90a") {
    cases.emplace_back("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,TMA=1", &shapes_64);
    cases.emplace_back("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,TMA=1,PACK_GQA=1", &shapes_64);
    cases.emplace_back("BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,TMA=1,STAGE_RELEASE=1", &shapes_128);
    cases.emplace_back("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,TMA=1,SPLIT_KV=8", &shapes_128);
  }
  expect_every_gate_passes(ev, cases);
  // Splits beyond a cluster (16 blocks) merge through the workspace, the last block to
  // finish folding every partial: mma.sync with two key groups, and wgmma TMA with PACK_GQA on
  // long decode steps. Every gate, the sanitizer's included; the repeated launches find the
  // counters the previous launch left at zero.
  const std::vector<Problem> long_decode = {problem("2x32x1x8192x128:kv8:bf16"),
                                            problem("1x8x5x4097x128:kv2:causal:bf16")};
  GateCases in_memory = {
      {"BLOCK_M=32,BLOCK_N=32,WARPS=4,STAGES=2,SPLIT_KV=16", &shapes_64}};
  if (ev.device().arch() == "sm_90a") {
    in_memory.emplace_back("BLOCK_M=64,BLOCK_N=32,WARPS=4,STAGES=2,WGMMA=1,TMA=1,SPLIT_KV=16,PACK_GQA=1", &shapes_128);
    in_memory.emplace_back("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=4,WGMMA=1,SCHEDULE=tma_release,SPLIT_KV=16,PACK_GQA=1",
                           &long_decode);
  }
  expect_every_gate_passes(ev, in_memory);
}

// The warp-specialized schedules (a producer warpgroup issuing the copies, registers handed to
// one or two computing warpgroups): fp16, bf16 and e4m3, head dims 64 and 128, ragged lengths,
// causal, a KV cache's diagonal, grouped heads with and without PACK_GQA, packed batches, three
// stages, LAZY_RESCALE. Every gate, the sanitizer's four tools included
// (racecheck and synccheck see the producer's barriers).
TEST(CudaEvaluator, WarpSpecializedSchedulesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "the warp-specialized schedules need TMA and wgmma, on sm_90a";
  const std::vector<Problem> dense = {problem("1x8x17x64"), problem("2x8x777x64:causal"),
                                      problem("1x8x4097x128:causal:bf16"), problem("1x8x300x1152x128:kv2:causal:bf16"),
                                      problem("33+1+4097x4x128:bf16")};
  const std::vector<Problem> grouped = {problem("1x8x17x777x64:kv2:causal"), problem("2x32x1x2048x128:kv8:bf16")};
  const std::vector<Problem> e4m3 = {problem("1x8x17x64:e4m3"), problem("2x8x777x64:causal:e4m3"),
                                     problem("1x8x4097x128:causal:e4m3")};
  const GateCases cases = {
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong", &dense},
      {"BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized,LAZY_RESCALE=1", &dense},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_pingpong,TMA_BOX_ROWS=256", &dense},
      {"BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized,PACK_GQA=1", &grouped},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong", &e4m3},
      {"BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized", &e4m3}};
  expect_every_gate_passes(ev, cases);
}

// Persistent producer blocks (the _persistent schedules on dense batches; the output tile past the
// stages, or over Q): shapes of more work tiles than the device holds blocks, so every block goes
// on through several, causal ones in both block orders (work tiles of different lengths), fp16,
// bf16 and e4m3, one and two computing warpgroups, head dims 64 and 128, two and three stages; a
// persistent grid, the repeated launches, and the sanitizer's four tools, whose launches take
// three blocks.
TEST(CudaEvaluator, PersistentProducerBlocksPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "the warp-specialized schedules need TMA and wgmma, on sm_90a";
  const std::vector<Problem> wide = {problem("4x16x1000x128"), problem("2x8x4097x128:causal"),
                                     problem("1x32x1100x128:kv8:causal:bf16")};
  const std::vector<Problem> e4m3 = {problem("4x16x1000x128:e4m3"), problem("2x8x4097x128:causal:e4m3")};
  const std::vector<Problem> one_warpgroup = {problem("4x16x1000x128:bf16"), problem("2x16x2049x128:causal")};
  const std::vector<Problem> narrow = {problem("4x16x1000x64"), problem("2x16x2049x64:causal")};
  const GateCases cases = {
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
       "TMA_BOX_ROWS=256,LAZY_RESCALE=1",
       &wide},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
       "TMA_BOX_ROWS=256,LAZY_RESCALE=1,LONGEST_FIRST=1",
       &wide},
      {"BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_persistent", &wide},
      {"BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
       "TMA_BOX_ROWS=256,LAZY_RESCALE=1",
       &e4m3},
      {"BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_persistent", &one_warpgroup},
      // The output tile over Q, which the next work tile's Q waits for the store to free.
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
       "TMA_BOX_ROWS=256,LAZY_RESCALE=1,LONGEST_FIRST=1",
       &wide},
      {"BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_persistent", &narrow}};
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  for (const auto& [genes, shapes] : cases)
    for (const Problem& p : *shapes) {
      const LaunchConfig l = space.launch(space.parse(genes), p);
      EXPECT_EQ(l.persistent, 1) << genes << " at " << p.text();
      EXPECT_GT(l.grid_x * l.grid_y, ev.device().sm_count()) << genes << " at " << p.text() << ": no block loops";
    }
  expect_every_gate_passes(ev, cases);
}

// Packed batches (varlen): sequences of ragged lengths, some shorter than a block and some whose
// last block runs into the next sequence's rows, against chunks of a cache and whole prompts,
// through every pipeline that can serve them (the sanitizer's run included).
TEST(CudaEvaluator, PackedBatchesOfRaggedLengthsPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const std::vector<Problem> shapes_64 = {problem("17+300+1152+5+777x8x64:kv2:causal"),
                                          problem("1/4096+16/1024+200/777+3000/3000x8x64:kv2:causal"),
                                          problem("33+1+4097x4x64")};
  const std::vector<Problem> shapes_128 = {problem("17+250+600+1100+3000x32x128:kv8:causal:bf16"),
                                           problem("1/4096+16/1024+512/4096x8x128:kv2:causal:bf16"),
                                           problem("777+64+129x8x128:bf16")};
  GateCases cases = {
      {"BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2", &shapes_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=1,SCHEDULE=sync", &shapes_64},
      {"BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_KV=4", &shapes_128}};
  if (ev.device().arch() == "sm_90a") {
    cases.emplace_back("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,TMA=1", &shapes_64);
    cases.emplace_back("BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,TMA=1,STAGE_RELEASE=1", &shapes_128);
    cases.emplace_back("BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=pingpong", &shapes_128);
    cases.emplace_back("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,TMA=1,SPLIT_KV=8", &shapes_128);
  }
  expect_every_gate_passes(ev, cases);
}

// FP8: e4m3 Q, K and V with per-head scales, V transposed, a bf16 output. Lengths 1, 17, 777 and
// 4097 (a tile's first row alone, partial tiles, a tile past a 4096 boundary), head dims 64 (the
// 64-byte swizzle) and 128, causal, a cache and grouped heads; every schedule the dtype takes, a
// warpgroup reading the second half of a tile's keys (WARPS_KV 2), a cluster, LAZY_RESCALE. Every
// gate: QGMMA in the SASS, the float32 reference of the values the bytes stand for, the repeated
// launches, the sanitizer's four tools.
TEST(CudaEvaluator, E4m3GenomesPassEveryGateOnRaggedLengths) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "e4m3 genomes need wgmma, on sm_90a";
  const std::vector<Problem> shapes_64 = {problem("1x8x17x64:e4m3"), problem("2x8x777x64:causal:e4m3"),
                                          problem("1x4x1x4097x64:kv2:e4m3")};
  const std::vector<Problem> shapes_128 = {problem("1x8x4097x128:causal:e4m3"),
                                           problem("2x8x17x777x128:kv2:causal:e4m3"), problem("1x8x1x128:e4m3")};
  // A cluster splits the keys: every shape has two tiles or more.
  const std::vector<Problem> shapes_split = {problem("2x8x777x64:causal:e4m3"), problem("1x4x1x4097x64:kv2:e4m3")};
  const GateCases cases = {
      {"BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma", &shapes_64},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=tma_pv", &shapes_128},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=pingpong,LAZY_RESCALE=1", &shapes_64},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=pingpong", &shapes_128},
      {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=qk_ahead_release", &shapes_128},
      {"BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=tma_release_pv", &shapes_128},
      {"BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma_release,SPLIT_KV=2", &shapes_split}};
  const std::vector<v1::Evaluation> evaluations = expect_every_gate_passes(ev, cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    const v1::Evaluation& e = evaluations[i];
    ASSERT_GE(e.gates_size(), 3) << cases[i].first;
    EXPECT_NE(e.gates(2).detail().find("QGMMA"), std::string::npos) << cases[i].first << ": " << e.gates(2).detail();
  }
}

// Tiles of 192 keys (one m64n192 wgmma per warpgroup for QK^T, as FlashAttention-3's wide FP8
// tiles): three 64-key V^T boxes a tile in e4m3, and ragged tails that end inside a tile's third
// panel, through the producer (e4m3, and 16-bit on two stages), pingpong and one-warpgroup
// schedules (the sanitizer's run included).
TEST(CudaEvaluator, WideKeyTilesPassEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  if (ev.device().arch() != "sm_90a") GTEST_SKIP() << "192-key tiles are wgmma's, on sm_90a";
  const std::vector<Problem> e4m3_128 = {problem("1x8x4097x128:causal:e4m3"),
                                         problem("2x8x17x777x128:kv2:causal:e4m3"), problem("1x8x1x128:e4m3")};
  const std::vector<Problem> e4m3_64 = {problem("1x8x17x64:e4m3"), problem("2x8x777x64:causal:e4m3")};
  const std::vector<Problem> dense = {problem("2x8x777x64:causal"), problem("1x8x4097x128:causal:bf16"),
                                      problem("1x8x300x1152x128:kv2:causal")};
  const std::vector<Problem> dense_128 = {problem("1x8x4097x128:causal:bf16"), problem("1x8x300x1152x128:kv2:causal"),
                                          problem("2x8x777x128")};
  const GateCases cases = {
      {"BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_pingpong,TMA_BOX_ROWS=256,LAZY_RESCALE=1",
       &e4m3_128},
      {"BLOCK_M=64,BLOCK_N=192,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma_release", &e4m3_64},
      {"BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=pingpong,TMA_BOX_ROWS=256", &dense},
      // 16-bit 192-key tiles fit two stages only, where the producer frees K and V apart (at head
      // dim 128: at 64, without the register hand-over, ptxas spills it).
      {"BLOCK_M=128,BLOCK_N=192,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong,TMA_BOX_ROWS=256,LAZY_RESCALE=1",
       &dense_128}};
  expect_every_gate_passes(ev, cases);
}

// LONGEST_FIRST: causal blocks in longest-first order across the heads of L2 sections. At
// 2x16x2049x128 a K/V head takes 1 MB, so the 32 row groups form a section of 31 and one of 1:
// every block still computes one tile of its own (an output element no block writes is NaN and
// fails the gate). Through the producer, the release pipeline in e4m3, mma.sync with PACK_GQA
// and a split over a cluster; a cache's diagonal and a packed batch too (the sanitizer's run
// included).
TEST(CudaEvaluator, LongestFirstBlockOrderPassesEveryGate) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const std::vector<Problem> dense_128 = {problem("2x16x2049x128:causal:bf16"),
                                          problem("1x32x300x1152x128:kv8:causal"),
                                          problem("17+250+600x32x128:kv8:causal:bf16")};
  const std::vector<Problem> e4m3 = {problem("2x16x2049x128:causal:e4m3"), problem("2x8x777x64:causal:e4m3")};
  const std::vector<Problem> grouped = {problem("1x32x17x777x128:kv8:causal:bf16"), problem("2x8x777x64:kv2:causal")};
  const std::vector<Problem> split = {problem("2x16x2049x64:causal"), problem("1x8x300x1152x64:kv2:causal")};
  GateCases cases = {
      {"BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,PACK_GQA=1,LONGEST_FIRST=1", &grouped}};
  if (ev.device().arch() == "sm_90a") {
    cases.emplace_back(
        "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=warp_specialized_pingpong,TMA_BOX_ROWS=256,"
        "LAZY_RESCALE=1,LONGEST_FIRST=1",
        &dense_128);
    cases.emplace_back("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma_release,TMA_BOX_ROWS=256,LONGEST_FIRST=1",
                       &e4m3);
    cases.emplace_back("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,SPLIT_KV=4,LONGEST_FIRST=1", &split);
  }
  expect_every_gate_passes(ev, cases);
}

TEST(CudaEvaluator, TwentyGenomesSpreadOverTheSpacePassCorrectness) {
  EVO_REQUIRE_GPU();
  CudaEvaluator& ev = *shared_evaluator();
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const auto shapes = gate_shapes();
  const auto genomes = spread_sample(space, shapes, ev.device().smem_per_block_optin(), 40);
  ASSERT_GE(genomes.size(), 20u);
  for (const auto& g : genomes) ev.prefetch(g, shapes);  // compile ahead, in parallel
  std::printf("%-60s %5s %7s %-8s %10s\n", "genome", "regs", "smem", "status", "median_us");
  int passed = 0;
  for (const auto& g : genomes) {
    const v1::Evaluation e = ev.evaluate(g, shapes, false);
    const int smem = e.resources().static_smem_bytes() + e.resources().dynamic_smem_bytes();
    std::printf("%-60s %5d %7d %-8s %10.2f\n", g.genes_text().c_str(), e.resources().registers(),
                smem, v1::EvalStatus_Name(e.status()).c_str(),
                e.shapes_size() ? e.shapes(0).median_us() : 0.0);
    // A genome the compiler had to spill is rejected before any launch, rightly; every genome
    // that reaches the GPU must be correct, and at least 20 must reach it.
    if (e.status() == v1::RESOURCE_REJECT) continue;
    EXPECT_EQ(e.status(), v1::OK) << g.text() << ": " << gate_summary(e);
    passed += e.status() == v1::OK;
  }
  EXPECT_GE(passed, 20);
}

// Genomes prefetched and never evaluated (their leases dropped) are not held once their compiles
// have landed: the next prefetch lets them go.
TEST(CudaEvaluator, PrefetchesOfGenomesNeverEvaluatedAreLetGo) {
  EVO_REQUIRE_GPU();
  // An evaluator of its own over an empty compile cache: a kernel another test compiled lands at
  // once, and the second prefetch would let the first go before the count below.
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("evo-gpu-tests-prefetch-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  EvaluatorOptions options;
  options.cache_dir = cache.string();
  CudaEvaluator ev(options, cuda::probe_device(0));
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const std::vector<Problem> shapes = {problem("1x8x512x64")};
  const std::vector<Genome> dropped = {space.parse("BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2"),
                                       space.parse("BLOCK_M=32,BLOCK_N=32,WARPS=2,STAGES=3")};
  for (const auto& g : dropped) ev.prefetch(g, shapes);
  EXPECT_GE(ev.prefetches_held(), 2u);
  for (const auto& g : dropped)
    while (!ev.compiled(g, shapes)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Genome next = space.parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2");
  ev.prefetch(next, shapes);
  EXPECT_EQ(ev.prefetches_held(), 1u) << "only the genome just prefetched";
  EXPECT_EQ(ev.evaluate(next, shapes, false).status(), v1::OK);
  EXPECT_EQ(ev.prefetches_held(), 0u);
  std::filesystem::remove_all(cache);
}

TEST(CudaEvaluator, InvalidGenomeStopsBeforeAnyLaunch) {
  EVO_REQUIRE_GPU();
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  // STAGES 3 without cp.async breaks pipeline_needs_cp_async.
  const Genome g = space.parse("BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=3,CP_ASYNC=0,SWIZZLE=1");
  const v1::Evaluation e = shared_evaluator()->evaluate(g, gate_shapes(), false);
  EXPECT_EQ(e.status(), v1::INVALID) << gate_summary(e);
  expect_gate_order(e);
  EXPECT_EQ(e.gates(3).outcome(), v1::VERDICT_NOT_RUN);
}

TEST(CudaEvaluator, ComputeSanitizerPassesTheDefaultGenome) {
  EVO_REQUIRE_GPU();
  if (cuda::find_compute_sanitizer().empty()) GTEST_SKIP() << "compute-sanitizer not found";
  const auto& space = SearchSpace::for_template("fa_s512_v3");
  const std::vector<Problem> shapes = {problem("1x8x512x64"), problem("1x8x512x64", true)};
  // An evaluator of its own: the shared one may have sanitized these kernels already.
  CudaEvaluator ev(EvaluatorOptions(), cuda::probe_device(0));
  const v1::Evaluation e = ev.evaluate(space.default_genome(), shapes, true);
  ASSERT_EQ(e.status(), v1::OK) << gate_summary(e);
  EXPECT_EQ(e.gates(5).outcome(), v1::VERDICT_PASSED) << e.gates(5).detail();
  EXPECT_NE(e.gates(5).detail().find("racecheck"), std::string::npos);
  EXPECT_GT(e.gates(5).elapsed_ms(), 0);
  std::printf("gate wall ms:");
  for (const auto& g : e.gates()) std::printf(" %s %.0f", g.gate().c_str(), g.elapsed_ms());
  std::printf(", evaluation %.0f\n", e.wall_ms());
  // The same kernels again (the same genome at 2x8x512x64 compiles to the same cubins, and the
  // sanitizer's small problems are the family's): the pass stands, the tools do not run again.
  const v1::Evaluation again =
      ev.evaluate(space.default_genome(), {problem("2x8x512x64"), problem("2x8x512x64", true)}, true);
  ASSERT_EQ(again.status(), v1::OK) << gate_summary(again);
  EXPECT_EQ(again.gates(5).outcome(), v1::VERDICT_PASSED);
  EXPECT_NE(again.gates(5).detail().find("passed it earlier in this worker"), std::string::npos)
      << again.gates(5).detail();
  EXPECT_EQ(again.gates(5).elapsed_ms(), 0);
}

}  // namespace
}  // namespace evo
