#include "attention/model_estimate.h"
#include "attention/problem.h"
#include "model_evaluator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "errors.h"
#include "model_calibration.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

const SearchSpace& space() { return SearchSpace::for_template("fa_s512_v3"); }
const DeviceModel& h100() { return *find_device_model("sm_90a"); }

v1::ResourceReport resources(int registers) {
  v1::ResourceReport r;
  r.set_registers(registers);
  return r;
}

Problem shape(int batch, int heads, int seq, int d = 64, bool causal = false, DType dtype = DType::kF16) {
  attention::Shape s;
  s.batch = batch, s.heads = heads, s.seq_q = s.seq_k = seq, s.head_dim = d, s.causal = causal;
  s.dtype = dtype;
  return attention::to_problem(s);
}

TEST(ModelEstimate, MoreRegistersMeanLessOccupancyAndNoSpeedup) {
  const Genome g = space().parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2");
  const auto big = shape(8, 16, 2048);
  const auto lean = estimate_kernel(h100(), space(), g, big, resources(64));
  const auto fat = estimate_kernel(h100(), space(), g, big, resources(255));
  EXPECT_GT(lean.blocks_per_sm, fat.blocks_per_sm);
  EXPECT_LT(lean.waves, fat.waves);
  EXPECT_LT(lean.us, fat.us);
}

// bf16 moves as many bytes and runs at the same tensor-core rate as fp16: the same estimate.
TEST(ModelEstimate, Bf16CostsWhatFp16Costs) {
  const Genome g = space().default_genome();
  for (bool causal : {false, true}) {
    const auto fp16 = shape(4, 16, 2048, 64, causal);
    const Problem bf16 = shape(4, 16, 2048, 64, causal, DType::kBF16);
    const auto a = estimate_kernel(h100(), space(), g, fp16, resources(96));
    const auto b = estimate_kernel(h100(), space(), g, bf16, resources(96));
    EXPECT_DOUBLE_EQ(a.us, b.us) << causal;
    EXPECT_EQ(a.blocks_per_sm, b.blocks_per_sm);
  }
}

// A packed batch is priced by its own lengths, not as the dense batch of its longest: a batch of
// one long sequence and seven short ones costs about what the long one does.
TEST(ModelEstimate, APackedBatchCostsItsOwnLengths) {
  const Genome g = space().parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2");
  const auto packed = attention::to_problem(attention::parse_shape("17+17+17+17+17+17+17+3000x8x64"));
  const auto longest = shape(8, 8, 3000);
  const auto one = shape(1, 8, 3000);
  const auto a = estimate_kernel(h100(), space(), g, packed, resources(96));
  const auto b = estimate_kernel(h100(), space(), g, longest, resources(96));
  const auto c = estimate_kernel(h100(), space(), g, one, resources(96));
  EXPECT_LT(a.us, b.us / 4);
  EXPECT_GT(a.us, c.us * 0.5);
  EXPECT_DOUBLE_EQ(attention::packed_work_fraction(attention::shape_of(longest)), 1.0);
}

// e4m3 runs the tensor cores at twice the 16-bit rate and reads half the bytes: faster where the
// tensor rate binds (blocks sharing an SM; a lone block's chain of steps is the dtype's alike).
TEST(ModelEstimate, E4m3IsFasterThanBf16WhereBlocksShareAnSm) {
  for (const char* genes : {"BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=tma_pv",
                            "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=1,WGMMA=1,SCHEDULE=tma",
                            "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma_release"}) {
    const Genome g = space().parse(genes);
    const auto a = estimate_kernel(h100(), space(), g, shape(2, 16, 4096, 128, false, DType::kE4M3), resources(96));
    const auto b = estimate_kernel(h100(), space(), g, shape(2, 16, 4096, 128, false, DType::kBF16), resources(96));
    EXPECT_LT(a.us, b.us) << genes;
  }
}

TEST(ModelEstimate, MoreWavesTakeLonger) {
  const Genome g = space().default_genome();
  const auto one = estimate_kernel(h100(), space(), g, shape(1, 8, 512), resources(96));
  const auto many = estimate_kernel(h100(), space(), g, shape(16, 16, 512), resources(96));
  EXPECT_EQ(one.waves, 1);
  EXPECT_GT(many.waves, one.waves);
  EXPECT_GT(many.us, one.us);
}

TEST(ModelEstimate, PipelinedCopiesBeatSynchronousOnes) {
  const auto s = shape(4, 16, 1024);
  const auto piped = estimate_kernel(h100(), space(), space().parse("STAGES=2,SCHEDULE=cp_async"), s, resources(96));
  const auto sync = estimate_kernel(h100(), space(), space().parse("STAGES=1,SCHEDULE=sync"), s, resources(96));
  EXPECT_LT(piped.us, sync.us);
}

// Suite 7 on an H100 (bench/NOTES.md): the one-stage TMA block, whose K and V are refilled apart,
// fits four to an SM in 122 registers and beat the two-stage block (three to an SM, by shared
// memory) at 16,16,512,64 and 4,16,2048,64. A one-stage block copying with cp.async waits for
// every tile.
TEST(ModelEstimate, OneStageTmaHidesItsCopiesAndFitsMoreBlocks) {
  const char* tiles = "BLOCK_M=64,BLOCK_N=128,WARPS=4,WGMMA=1";
  for (const auto& s : {shape(16, 16, 512), shape(4, 16, 2048)}) {
    const auto one_tma = estimate_kernel(
        h100(), space(), space().parse(std::string(tiles) + ",STAGES=1,SCHEDULE=tma"), s, resources(122));
    const auto two_tma = estimate_kernel(
        h100(), space(), space().parse(std::string(tiles) + ",STAGES=2,SCHEDULE=tma"), s, resources(128));
    const auto one_cp = estimate_kernel(
        h100(), space(), space().parse(std::string(tiles) + ",STAGES=1,SCHEDULE=cp_async"), s, resources(122));
    EXPECT_EQ(one_tma.blocks_per_sm, 4);
    EXPECT_EQ(two_tma.blocks_per_sm, 3);
    EXPECT_LT(one_tma.us, two_tma.us) << s.text();
    EXPECT_LT(one_tma.us, one_cp.us) << s.text();
  }
}

TEST(ModelEstimate, IsNotAConstantOverTheSpace) {
  const auto s = shape(1, 8, 512);
  std::set<double> seen;
  for (const char* text : {"BLOCK_M=16,WARPS=1", "BLOCK_M=32,WARPS=2", "BLOCK_M=64,WARPS=4",
                           "BLOCK_M=128,WARPS=8,BLOCK_N=32"})
    seen.insert(estimate_kernel(h100(), space(), space().parse(text), s, resources(96)).us);
  EXPECT_EQ(seen.size(), 4u);
}

// One head of a long sequence leaves most SMs idle; splitting its keys over blocks fills them.
TEST(ModelEstimate, SplittingKeysHelpsAFewLongRows) {
  const auto s = shape(1, 1, 8192);
  const auto whole = estimate_kernel(h100(), space(), space().parse("BLOCK_M=128,WARPS=8,SPLIT_KV=1"), s, resources(96));
  const auto split = estimate_kernel(h100(), space(), space().parse("BLOCK_M=128,WARPS=8,SPLIT_KV=8"), s, resources(96));
  EXPECT_LT(split.us, whole.us);
}

// At 1,8,512,64 an H100 ran split-2 wgmma 64x128x8x3 blocks and unsplit mma.sync 32x256x8x3 ones
// level (5.23 us both, bench/NOTES.md): the split's shorter loop is spent on its cluster merge.
// Without the merge's cost the model put the split 20 % ahead.
TEST(ModelEstimate, ClusterMergeCostsWhatTheSplitSaves) {
  const auto s = shape(1, 8, 512);
  const auto unsplit =
      estimate_kernel(h100(), space(), space().parse("BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=3"), s,
                      resources(128));
  const auto split = estimate_kernel(
      h100(), space(), space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,WGMMA=1,SPLIT_KV=2"),
      s, resources(125));
  EXPECT_GT(split.us, 0.95 * unsplit.us);
}

// Each other block of a cluster adds its share to the merge: at 1,8,512,64 an H100 ran wg
// 64x128x4x2 split 4 at 8.19 us against 5.23 for split-2 blocks and the unsplit mma.sync winner
// (bench/NOTES.md, 2026-11-26).
TEST(ModelEstimate, ClustersOfFourMergeLongerThanClustersOfTwo) {
  const auto s = shape(1, 8, 512);
  const auto unsplit = estimate_kernel(
      h100(), space(), space().parse("BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,SCHEDULE=tma"), s, resources(123));
  const char* wg = "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,SPLIT_KV=";
  const auto two = estimate_kernel(h100(), space(), space().parse(std::string(wg) + "2"), s, resources(110));
  const auto four = estimate_kernel(h100(), space(), space().parse(std::string(wg) + "4"), s, resources(110));
  EXPECT_GT(four.us, 1.3 * unsplit.us);
  EXPECT_GT(four.us, two.us);
}

// At a compute-bound shape the same tiles estimate faster through wgmma, the full tensor rate.
TEST(ModelEstimate, WgmmaTilesAreFasterWhereTheTensorRateBinds) {
  const auto s = shape(4, 16, 2048);
  const char* tiles = "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2";
  const auto sync = estimate_kernel(h100(), space(), space().parse(tiles), s, resources(165));
  const auto wgmma =
      estimate_kernel(h100(), space(), space().parse(std::string(tiles) + ",WGMMA=1"), s, resources(165));
  EXPECT_LT(wgmma.us, sync.us);
}

// Estimates that the model gave before its attention part moved into the family
// (kernel_templates/attention/model_estimate.cpp), computed by the code of that time for measured
// genomes (their registers and static shared memory from the file): the move, and any refactoring
// after it, must keep them to the bit. A change to the model itself changes them, and says why.
TEST(ModelEstimate, KeepsTheEstimatesOfTheModelAsFitted) {
  struct Pinned {
    const char* arch;
    const char* file;
    const char* shape;
    const char* genome;
    double us;
    int blocks_per_sm;
    int64_t waves;
  };
  const Pinned pinned[] = {
      {"sm_90a", "h200_held_out_2_large.csv", "16x16x512x64",
       "fa_s512_v3:BLOCK_M=16,BLOCK_N=256,WARPS=4,STAGES=1,SCHEDULE=sync,SWIZZLE=0,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.c4aafb361489cp+9, 2, 32},
      {"sm_90a", "h200_held_out_2_large.csv", "2x16x4096x128:causal",
       "fa_s512_v3:BLOCK_M=128,BLOCK_N=32,WARPS=8,STAGES=4,SCHEDULE=tma,SWIZZLE=1,SPLIT_KV=4,WGMMA=1,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.3103fcbc0ca79p+9, 1, 32},
      {"sm_90a", "h200_held_out_large.csv", "3x5x700x1300x64",
       "fa_s512_v3:BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=4,SCHEDULE=qk_ahead,SWIZZLE=1,SPLIT_KV=2,WGMMA=1,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.0c5b77f79772dp+5, 1, 2},
      {"sm_90a", "h200_held_out_small.csv", "1x8x512x64:causal",
       "fa_s512_v3:BLOCK_M=128,BLOCK_N=64,WARPS=8,STAGES=4,SCHEDULE=qk_ahead_release,SWIZZLE=1,SPLIT_KV=8,WGMMA=1,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.06417fddab934p+5, 1, 2},
      {"sm_80", "h200_held_out_2_large.csv", "1x8x512x64:bf16",
       "fa_s512_v3:BLOCK_M=64,BLOCK_N=32,WARPS=2,STAGES=4,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=1,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.deaa9f770c45ep+4, 4, 1},
      {"sm_89", "h200_held_out_2_small.csv", "1x8x512x64:causal",
       "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=8,STAGES=3,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=2,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=1,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.af3b929e9fd55p+3, 1, 2},
      {"sm_90a", "h200_held_out_2_large.csv", "16x16x512x64",
       "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,SCHEDULE=tma,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=256,LAZY_RESCALE=1,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.863cc7e882644p+6, 3, 6},
      {"sm_90a", "h200_held_out_2_large.csv", "16x16x512x64",
       "fa_s512_v3:BLOCK_M=64,BLOCK_N=256,WARPS=8,STAGES=3,SCHEDULE=pingpong,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.94bd479a63246p+6, 1, 16},
      {"sm_90a", "h200_held_out_2_large.csv", "16x16x512x64",
       "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=3,SCHEDULE=tma_release_pv,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,TMA_BOX_ROWS=64,LAZY_RESCALE=1,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0",
       0x1.b8521f2905f2bp+6, 1, 16},
  };
  for (const Pinned& p : pinned) {
    const std::vector<MeasuredGenome> rows = load_measured_genomes(std::string(EVO_TEST_DATA_DIR) + "/" + p.file);
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const MeasuredGenome& m) { return m.genome.text() == p.genome; });
    ASSERT_NE(row, rows.end()) << p.genome;
    v1::ResourceReport r;
    r.set_registers(row->registers);
    r.set_static_smem_bytes(row->static_smem_bytes);
    const auto est = estimate_kernel(*find_device_model(p.arch), space(), row->genome, space().family().parse(p.shape, {}), r);
    EXPECT_EQ(est.us, p.us) << p.arch << " " << p.shape << " " << p.genome;
    EXPECT_EQ(est.blocks_per_sm, p.blocks_per_sm) << p.genome;
    EXPECT_EQ(est.waves, p.waves) << p.genome;
  }
}

// The family's part comes through the genome's template; a genome of none has no estimate.
TEST(ModelEstimate, AGenomeOfAnUnknownTemplateIsAnInputError) {
  const Genome g("no_such_kernel", space().default_genome().genes());
  try {
    estimate_kernel(h100(), space(), g, shape(1, 8, 512), resources(96));
    ADD_FAILURE() << "estimated a genome of no template";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "no model estimate for unknown template 'no_such_kernel'");
  }
}

TEST(ModelEvaluator, UnknownArchIsAnInputError) {
  EvaluatorOptions o;
  o.backend = "model";
  o.arch = "sm_75";
  EXPECT_THROW(make_model_evaluator(o), InputError);
}

TEST(ModelEvaluator, InvalidGenomeIsRejectedBeforeAnyCompile) {
  test::TempDir dir;
  EvaluatorOptions o;
  o.backend = "model";
  o.cache_dir = dir.path();
  auto ev = make_model_evaluator(o);
  const auto e = ev->evaluate(space().parse("BLOCK_M=16,WARPS=8,BLOCK_N=64"), {shape(1, 8, 512)}, false);
  EXPECT_EQ(e.status(), v1::INVALID);
  EXPECT_NE(e.message().find("violates kv_split_keeps_mma_k"), std::string::npos) << e.message();
  EXPECT_TRUE(e.estimated());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "nothing may be compiled";
}

// Needs the real fa_s512_v3 kernel (the template registry embeds it at build time).
TEST(ModelEvaluator, CompilesRanksAndMarksEstimated) {
  if (find_template("fa_s512_v3")->source.size() < 200)
    GTEST_SKIP() << "fa_s512_v3.cuh is still a placeholder";
  test::TempDir dir;
  EvaluatorOptions o;
  o.backend = "model";
  o.cache_dir = dir.path();
  auto ev = make_model_evaluator(o);
  EXPECT_EQ(ev->device().backend(), "model");
  EXPECT_EQ(ev->device().device_class(), "sm_90a/model/estimated");
  const auto s = shape(1, 8, 512);
  const auto a = ev->evaluate(space().default_genome(), {s, shape(2, 8, 512, 64, true)}, false);
  ASSERT_EQ(a.status(), v1::OK) << a.message();
  EXPECT_TRUE(a.estimated());
  EXPECT_GT(a.resources().registers(), 0);
  ASSERT_EQ(a.shapes_size(), 2);
  EXPECT_GT(a.shapes(0).median_us(), 0);
  EXPECT_EQ(a.shapes(0).p10_us(), a.shapes(0).median_us());
  EXPECT_GT(a.shapes(0).tflops(), 0);
  EXPECT_GT(a.fitness_us(), 0);
  int skipped = 0;
  for (const auto& g : a.gates())
    if (g.outcome() == v1::VERDICT_SKIPPED && g.detail() == "model evaluator") ++skipped;
  EXPECT_EQ(skipped, 3);  // correct, timed, sanitizer
  // Where the evaluation's time went: the compile gate waited for NVRTC, and the whole is no less
  // than its gates.
  double gates_ms = 0;
  for (const auto& g : a.gates()) gates_ms += g.elapsed_ms();
  ASSERT_EQ(a.gates(1).kind(), v1::GATE_COMPILE);
  EXPECT_EQ(a.gates(1).gate(), "compile") << "and its label, for an older evod";
  EXPECT_GT(a.gates(1).elapsed_ms(), 0);
  EXPECT_GE(a.wall_ms(), gates_ms);
  const auto b = ev->evaluate(space().parse("BLOCK_M=128,BLOCK_N=32,WARPS=8,STAGES=1,SCHEDULE=sync"), {s}, false);
  ASSERT_EQ(b.status(), v1::OK) << b.message();
  EXPECT_NE(a.shapes(0).median_us(), b.shapes(0).median_us());
  // The same request again is served from the compile cache.
  EXPECT_TRUE(ev->evaluate(space().default_genome(), {s}, false).cache_hit());
}

}  // namespace
}  // namespace evo
