// The search space of fa_s512_v3 (its .space.json: constraints, shared-memory formula, launch
// formulas) held against the kernel's own constexpr plan() and check() (kernel_traits.cuh), for
// every genome of the space at two problems and both targets. The JSON is what evod and the
// worker read before any compile; the traits are what the kernel is built from. Where they
// disagree a genome either fails to compile (the space lets through what the kernel refuses), is
// never proposed though the kernel could run it, or is launched with the wrong shared memory.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "attention/problem.h"
#include "attention/fa_s512_v3/kernel_traits.cuh"
#include "attention/tensor_maps.h"
#include "device_limits.h"
#include "search_space.h"

namespace evo {
namespace {


// Constraints the kernel has no rule for, by design: one genome per kernel (TMA_BOX_ROWS values
// that name the same boxes), the problem's keys (SPLIT_KV), the device (shared memory, target).
const std::set<std::string> kNotKernelRules = {
    "box_rows_name_distinct_boxes", "box_rows_need_tma", "split_has_keys", "split_counters_fit",
    "shared_memory_fits_device",    "wgmma_needs_sm90a", "tma_needs_sm90a"};

fa::KernelConfig config_of(const Genome& g, const Problem& problem) {
  const attention::Shape p = attention::shape_of(problem);
  auto gene = [&](const char* name) { return static_cast<int>(g.get(name)); };
  return fa::KernelConfig{static_cast<int>(p.dtype),
                          p.causal ? 1 : 0,
                          p.head_dim,
                          gene("BLOCK_M"),
                          gene("BLOCK_N"),
                          gene("WARPS"),
                          gene("STAGES"),
                          gene("SCHEDULE"),
                          gene("SWIZZLE"),
                          gene("SPLIT_KV"),
                          gene("WGMMA"),
                          gene("TMA_BOX_ROWS"),
                          gene("LAZY_RESCALE"),
                          gene("CAUSAL_FOLD"),
                          gene("PACK_GQA"),
                          p.varlen() ? 1 : 0,
                          gene("LONGEST_FIRST")};
}

struct Tally {
  uint64_t genomes = 0, valid = 0, kernel_only = 0;
  std::map<std::string, uint64_t> kernel_only_by_rule;
};

// Every `stride`-th genome of the space, from the first.
void hold(const Problem& p, int sm_arch, uint64_t stride, Tally& tally) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  for (uint64_t i = 0; i < space.size(); i += stride) {
    const Genome g = space.at(i);
    const fa::KernelConfig c = config_of(g, p);
    const fa::Unsupported rule = fa::check(c);
    const auto violated = space.violated_constraint(g, p, kDefaultSmemLimit, sm_arch);
    ++tally.genomes;
    if (!violated) {
      ++tally.valid;
      // Everything the space lets through, the kernel implements ...
      ASSERT_EQ(rule, fa::Unsupported::kOk) << g.text() << " at " << p.text() << " sm_" << sm_arch;
      // ... with the shared memory and block the space's formulas give the launch.
      const fa::Plan plan = fa::plan(c);
      const LaunchConfig launch = space.launch(g, p);
      ASSERT_EQ(launch.smem_bytes, plan.smem_bytes) << g.text() << " at " << p.text();
      ASSERT_EQ(launch.threads, plan.block_threads) << g.text() << " at " << p.text();
      ASSERT_EQ(launch.min_registers, plan.min_registers) << g.text() << " at " << p.text();
      ASSERT_EQ(launch.persistent != 0, plan.persistent) << g.text() << " at " << p.text();
      // ... and tensor maps in boxes the host's encoder takes.
      if (launch.tensor_map_box_rows != 0) {
        ASSERT_TRUE(valid_tensor_map_box_rows(static_cast<int>(launch.tensor_map_box_rows)) &&
                    valid_tensor_map_box_rows(static_cast<int>(launch.tensor_map_q_box_rows)))
            << g.text() << " at " << p.text() << ": boxes of " << launch.tensor_map_box_rows << " and "
            << launch.tensor_map_q_box_rows << " rows";
      }
      continue;
    }
    if (rule != fa::Unsupported::kOk || kNotKernelRules.count(*violated)) continue;
    // The kernel would implement it, and a constraint that is not a device or problem limit
    // refuses it: the space forbids a kernel that exists.
    ++tally.kernel_only;
    ++tally.kernel_only_by_rule[*violated];
  }
}

Problem problem(int d, bool causal) {
  attention::Shape s;
  s.batch = 2, s.heads = 8, s.seq_q = s.seq_k = 512, s.head_dim = d, s.causal = causal;
  return attention::to_problem(s);
}

void agree(uint64_t stride) {
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  Tally tally;
  // Head dims 64 and 128, causal and not, each target: the problems that change what the space
  // or the kernel allows (CAUSAL_FOLD acts on causal calls only; SM_ARCH gates wgmma and TMA).
  for (int sm_arch : {80, 90}) {
    hold(problem(64, true), sm_arch, stride, tally);
    hold(problem(128, false), sm_arch, stride, tally);
  }
  // A packed batch of grouped heads: VARLEN takes the output tile and CAUSAL_FOLD and PACK_GQA away.
  hold(attention::to_problem(attention::parse_shape("17+300+1152x8x128:kv2:causal")), 90, stride, tally);
  // FP8: a byte an element of Q, K and V (64-byte rows at head dim 64), V^T, no PACK_GQA.
  hold(attention::to_problem(attention::parse_shape("2x8x512x64:causal:e4m3")), 90, stride, tally);
  hold(attention::to_problem(attention::parse_shape("2x8x512x128:kv2:e4m3")), 90, stride, tally);
  spdlog::set_level(level);
  std::printf("%llu genome/problem/target triples, %llu valid; %llu the kernel implements but a "
              "kernel-side constraint refuses\n",
              (unsigned long long)tally.genomes, (unsigned long long)tally.valid,
              (unsigned long long)tally.kernel_only);
  for (const auto& [rule, n] : tally.kernel_only_by_rule)
    std::printf("  %s: %llu\n", rule.c_str(), (unsigned long long)n);
  EXPECT_GT(tally.valid, 0u);
  EXPECT_EQ(tally.kernel_only, 0u) << "a constraint of the space forbids genomes the kernel can run";
}

// A split merged in the workspace: the space's launch asks for the kernel's counters and then a
// partial per row tile, block of the split and warp (epilogue.cuh's layout); a cluster asks for none.
TEST(KernelPlan, AWorkspaceSplitAsksForTheCountersAndAPartialPerBlock) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const Problem decode = attention::to_problem(attention::parse_shape("3x32x1x8192x128:kv8:bf16"));
  const Genome g = space.parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,SPLIT_KV=16,PACK_GQA=1");
  ASSERT_EQ(space.violated_constraint(g, decode, kDefaultSmemLimit, 90), std::nullopt);
  EXPECT_EQ(space.variables(g, decode, kDefaultSmemLimit).at("SPLIT_COUNTERS"), fa::kSplitCounters);
  const fa::Plan plan = fa::plan(config_of(g, decode));
  EXPECT_TRUE(plan.split_in_memory);
  EXPECT_EQ(plan.smem_inbox, 0);
  const int64_t tiles = 1 * 3 * 8;  // one row tile (4 query heads of one K/V head) per batch and K/V head
  EXPECT_EQ(space.launch(g, decode).workspace_bytes, 4 * (fa::kSplitCounters + tiles * 16 * 64 * (128 + 8)));
  EXPECT_EQ(space.launch(g, decode).workspace_zeroed_bytes, 4 * tiles * 4) << "each row tile's four warps' counters";
  const Genome cluster = space.parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,SPLIT_KV=8,PACK_GQA=1");
  EXPECT_FALSE(fa::plan(config_of(cluster, decode)).split_in_memory);
  EXPECT_EQ(space.launch(cluster, decode).workspace_bytes, 0);
  // More row tiles and warps than the counters: refused, where the kernel would trap.
  const Problem prefill = attention::to_problem(attention::parse_shape("64x32x4096x128:kv8:bf16"));
  EXPECT_EQ(space.violated_constraint(g, prefill, kDefaultSmemLimit, 90), "split_counters_fit");
  EXPECT_EQ(space.violated_constraint(cluster, prefill, kDefaultSmemLimit, 90), std::nullopt);
}

// The test command's sample: every 7th genome (a stride prime to every gene's count, so each
// gene's values all come round); the whole space is the `sweep` suite's (CMakeLists.txt).
TEST(KernelPlan, TheSpaceAndTheKernelAgreeOnEverySeventhGenome) { agree(7); }
TEST(KernelPlan, TheSpaceAndTheKernelAgreeOnEveryGenome) { agree(1); }

// check() is what a bad instantiation hits first: each rule refuses what it says.
TEST(KernelPlan, CheckNamesTheRuleABadConfigBreaks) {
  const fa::KernelConfig ok{0, 0, 64, 64, 128, 4, 2, 1, 1, 1, 0, 64, 0, 0, 0, 0};
  EXPECT_EQ(fa::check(ok), fa::Unsupported::kOk);
  auto with = [&](auto edit) {
    fa::KernelConfig c = ok;
    edit(c);
    return fa::check(c);
  };
  EXPECT_EQ(with([](auto& c) { c.dtype = 3; }), fa::Unsupported::kDType);
  // e4m3: wgmma from TMA, V^T boxes of 64 keys, dense batches with Q by tensor map.
  EXPECT_EQ(with([](auto& c) { c.dtype = 2; }), fa::Unsupported::kE4m3);
  EXPECT_EQ(with([](auto& c) { c.dtype = 2, c.wgmma = 1, c.schedule = 3; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.dtype = 2, c.wgmma = 1, c.schedule = 1; }), fa::Unsupported::kE4m3);
  EXPECT_EQ(with([](auto& c) { c.dtype = 2, c.wgmma = 1, c.schedule = 3, c.block_n = 32, c.warps = 4; }),
            fa::Unsupported::kE4m3);
  EXPECT_EQ(with([](auto& c) { c.dtype = 2, c.wgmma = 1, c.schedule = 3, c.pack_gqa = 1; }), fa::Unsupported::kE4m3);
  EXPECT_EQ(with([](auto& c) { c.schedule = 14; }), fa::Unsupported::kSchedule);
  // 192-key tiles: one m64n192 wgmma a warpgroup, never mma.sync's, nor 96 keys a key group.
  EXPECT_EQ(with([](auto& c) { c.block_n = 192; }), fa::Unsupported::kWideKeysWgmma);
  EXPECT_EQ(with([](auto& c) { c.block_n = 192, c.wgmma = 1, c.schedule = 3; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.block_n = 192, c.wgmma = 1, c.schedule = 3, c.warps = 8; }),
            fa::Unsupported::kWgmmaN);
  EXPECT_EQ(with([](auto& c) { c.head_dim = 96; }), fa::Unsupported::kHeadDim);
  EXPECT_EQ(with([](auto& c) { c.schedule = 0; }), fa::Unsupported::kSyncOneStage);
  EXPECT_EQ(with([](auto& c) { c.schedule = 2; }), fa::Unsupported::kPvAsync);  // mma.sync
  EXPECT_EQ(with([](auto& c) { c.schedule = 5; }), fa::Unsupported::kTmaMmaSync);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 7; }), fa::Unsupported::kPingpongWarps);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 8; }), fa::Unsupported::kQkAheadStages);
  // warp-specialized: one or two computing warpgroups, no cluster.
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 10, c.warps = 4, c.block_m = 64; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 10, c.warps = 4, c.block_m = 64, c.split_kv = 2; }),
            fa::Unsupported::kWarpSpecialized);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 10, c.warps = 16, c.block_m = 64; }),
            fa::Unsupported::kWarpSpecialized);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 10, c.warps = 8, c.block_m = 64; }),
            fa::Unsupported::kWarpSpecialized);  // two warpgroups splitting the keys of 64 rows
  // Key groups merging apart from the tiles (TMA, wgmma, two warpgroups on the keys of 64 rows)
  // store through the tensor map, never staged: not with PACK_GQA or VARLEN.
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 3, c.warps = 8; }), fa::Unsupported::kOk);
  EXPECT_TRUE(fa::plan(fa::KernelConfig{0, 0, 64, 64, 128, 8, 2, 3, 1, 1, 1, 64, 0, 0, 0, 0}).merge_apart);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 3, c.warps = 8, c.varlen = 1; }),
            fa::Unsupported::kStagedKeySplit);
  EXPECT_EQ(with([](auto& c) { c.wgmma = 1, c.schedule = 3, c.warps = 8, c.pack_gqa = 1; }),
            fa::Unsupported::kStagedKeySplit);
  EXPECT_EQ(with([](auto& c) { c.causal_fold = 1, c.wgmma = 1; }), fa::Unsupported::kFold);
  EXPECT_EQ(with([](auto& c) { c.pack_gqa = 1; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.pack_gqa = 2; }), fa::Unsupported::kPackGqa);
  // LONGEST_FIRST: a block order, not with the fold (whose blocks' work is even already).
  EXPECT_EQ(with([](auto& c) { c.longest_first = 1; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.longest_first = 2; }), fa::Unsupported::kLongestFirst);
  EXPECT_EQ(with([](auto& c) { c.longest_first = 1, c.causal = 1, c.causal_fold = 1, c.warps = 8; }),
            fa::Unsupported::kLongestFirst);
  EXPECT_EQ(with([](auto& c) { c.pack_gqa = 1, c.causal_fold = 1, c.warps = 8; }), fa::Unsupported::kPackGqa);
  EXPECT_EQ(with([](auto& c) { c.varlen = 1; }), fa::Unsupported::kOk);
  EXPECT_EQ(with([](auto& c) { c.varlen = 2; }), fa::Unsupported::kVarlen);
  EXPECT_EQ(with([](auto& c) { c.varlen = 1, c.pack_gqa = 1; }), fa::Unsupported::kVarlen);
  EXPECT_EQ(with([](auto& c) { c.varlen = 1, c.causal = 1, c.causal_fold = 1, c.warps = 8; }),
            fa::Unsupported::kVarlen);
}

// e4m3 tiles count 16-bit units: a k-step of either GEMM is 32 bytes, k32 of FP8; Q and K rows
// are half as many units, V^T's tile as many bytes as K's; the output tile stays 16-bit.
TEST(KernelPlan, AnE4m3PlanHalvesTheInputTilesAndKeepsTheOutputTile) {
  const fa::KernelConfig bf16{1, 0, 128, 128, 128, 8, 2, 4, 1, 1, 1, 64, 0, 0, 0, 0};
  fa::KernelConfig e4m3 = bf16;
  e4m3.dtype = 2;
  ASSERT_EQ(fa::check(e4m3), fa::Unsupported::kOk);
  const fa::Plan a = fa::plan(bf16), b = fa::plan(e4m3);
  EXPECT_EQ(b.qk_cols, 64);
  EXPECT_EQ(b.qk_panel, 64);
  EXPECT_EQ(b.qk_steps, a.qk_steps / 2);
  EXPECT_EQ(b.pv_steps, a.pv_steps / 2);
  EXPECT_EQ(b.kv_elems * 2, a.kv_elems);
  EXPECT_EQ(b.smem_main * 2, a.smem_main);
  EXPECT_EQ(b.smem_epilogue, a.smem_epilogue) << "O is bf16 either way";
  EXPECT_TRUE(b.v_transposed);
  e4m3.head_dim = 64;
  EXPECT_EQ(fa::plan(e4m3).qk_panel, 32) << "64-byte rows: the 64-byte swizzle";
}

// The producer on two stages frees K and V apart: each stage's K and V land on full barriers of
// their own and are freed on empty barriers of their own. On three or more stages a stage's K
// and V land and are freed together, and so do the release pipelines'. 16-bit 192-key tiles on
// two stages fit the block's shared memory.
TEST(KernelPlan, AProducerOnTwoStagesFreesKAndVApart) {
  for (int stages : {2, 3, 4}) {
    const fa::KernelConfig c{2, 0, 128, 128, 192, 8, stages, 11, 1, 1, 1, 256, 1, 0, 0, 0};
    ASSERT_EQ(fa::check(c), fa::Unsupported::kOk) << stages << " stages";
    const fa::Plan p = fa::plan(c);
    const bool apart = stages == 2;
    EXPECT_EQ(p.kv_barriers, apart) << stages << " stages";
    EXPECT_EQ(p.full_barriers, stages + 1 + (apart ? stages : 0)) << stages << " stages";
    EXPECT_EQ(p.empty_barriers, (apart ? 2 : 1) * stages) << stages << " stages";
  }
  const fa::KernelConfig wide16{0, 0, 128, 128, 192, 8, 2, 11, 1, 1, 1, 256, 1, 0, 0, 0};
  ASSERT_EQ(fa::check(wide16), fa::Unsupported::kOk);
  EXPECT_LE(fa::plan(wide16).smem_bytes, fa::kSmemOptInSm90);
  EXPECT_FALSE(fa::plan(fa::KernelConfig{0, 0, 128, 128, 128, 8, 2, 7, 1, 1, 1, 256, 1, 0, 0, 0}).kv_barriers);
}

// The persistent warp-specialized schedules (12, 13) make a producer block on a dense batch
// persistent. Its output tile lies past the stages where it fits there and an SM still holds as
// many blocks: the stages then hold the next work tile's K and V, and Q its Q, while the epilogue
// runs. Else, with 16-bit inputs, the tile lies over Q, which is freed once the store has read it.
// Q gets an empty barrier either way. Schedules 10 and 11 keep one block per work tile.
TEST(KernelPlan, APersistentProducerBlockPutsItsOutputTileApartOrOverQ) {
  const fa::KernelConfig one_per_tile{0, 0, 128, 128, 128, 8, 2, 11, 1, 1, 1, 256, 1, 0, 0, 0};
  ASSERT_EQ(fa::check(one_per_tile), fa::Unsupported::kOk);
  EXPECT_FALSE(fa::plan(one_per_tile).persistent);
  EXPECT_FALSE(fa::plan(one_per_tile).epilogue_apart);
  EXPECT_EQ(fa::plan(one_per_tile).empty_barriers, 2 * 2);
  fa::KernelConfig two = one_per_tile;
  two.schedule = static_cast<int>(fa::Schedule::kWarpSpecializedPingpongPersistent);
  ASSERT_EQ(fa::check(two), fa::Unsupported::kOk);
  const fa::Plan p = fa::plan(two);
  EXPECT_TRUE(p.persistent);
  EXPECT_FALSE(p.q_freed_after_store);
  EXPECT_TRUE(p.epilogue_apart);
  EXPECT_EQ(p.smem_epilogue_at, p.smem_main);
  EXPECT_EQ(p.smem_tiles, p.smem_main + 2 * 128 * 128) << "the fp16 output tile past Q and the stages";
  EXPECT_EQ(p.empty_barriers, 2 * 2 + 1);
  // Two computing warpgroups at head dim 128 fit one block an SM either way.
  EXPECT_EQ(fa::blocks_by_smem_sm90(p.smem_bytes), 1);
  // Three 16-bit stages of 128 keys at head dim 128 leave no room past them: the tile over Q.
  fa::KernelConfig three = two;
  three.stages = 3;
  ASSERT_EQ(fa::check(three), fa::Unsupported::kOk);
  const fa::Plan over_q = fa::plan(three);
  EXPECT_TRUE(over_q.persistent);
  EXPECT_TRUE(over_q.q_freed_after_store);
  EXPECT_FALSE(over_q.epilogue_apart);
  EXPECT_EQ(over_q.smem_epilogue_at, 0);
  EXPECT_EQ(over_q.smem_epilogue, 2 * over_q.q_elems) << "the 16-bit output tile fills Q's bytes exactly";
  EXPECT_EQ(over_q.empty_barriers, 3 + 1);
  // Where the tile apart would cost a block an SM (this head-dim-64 block fits two an SM with it
  // over Q, one with it apart), over Q.
  const fa::KernelConfig narrow{0, 0, 64, 64, 128, 4, 3, 12, 1, 1, 1, 256, 0, 0, 0, 0};
  ASSERT_EQ(fa::check(narrow), fa::Unsupported::kOk);
  EXPECT_EQ(fa::blocks_by_smem_sm90(fa::plan(narrow).smem_bytes), 2);
  EXPECT_TRUE(fa::plan(narrow).q_freed_after_store);
  // e4m3's output tile is twice its Q tile: apart, or the kernel refuses the genome.
  const fa::KernelConfig e4m3_four{2, 0, 128, 128, 192, 8, 4, 13, 1, 1, 1, 256, 1, 0, 0, 0};
  EXPECT_EQ(fa::check(e4m3_four), fa::Unsupported::kPersistent);
  fa::KernelConfig e4m3_three = e4m3_four;
  e4m3_three.stages = 3;
  ASSERT_EQ(fa::check(e4m3_three), fa::Unsupported::kOk);
  EXPECT_TRUE(fa::plan(e4m3_three).persistent);
  EXPECT_TRUE(fa::plan(e4m3_three).epilogue_apart);
  // Neither a packed batch nor PACK_GQA (their outputs leave by plain stores).
  auto refused = [&](auto change) {
    fa::KernelConfig c = two;
    change(c);
    return fa::check(c) == fa::Unsupported::kPersistent;
  };
  EXPECT_TRUE(refused([](auto& c) { c.varlen = 1; }));
  EXPECT_TRUE(refused([](auto& c) { c.pack_gqa = 1; }));
  EXPECT_EQ(fa::check(fa::KernelConfig{0, 0, 128, 128, 128, 8, 2, 13, 1, 2, 1, 256, 1, 0, 0, 0}),
            fa::Unsupported::kWarpSpecialized) << "SPLIT_KV is refused for every producer block first";
  EXPECT_FALSE(fa::schedule_is_valid(14));
}

// A packed batch's output leaves by plain stores: a TMA store's box would run into the next
// sequence's rows. The plan says so, and the space's shared-memory formula agrees (no output tile).
TEST(KernelPlan, APackedBatchNeverStoresThroughTheTensorMap) {
  fa::KernelConfig c{0, 0, 128, 128, 128, 8, 2, 5, 1, 1, 1, 64, 0, 0, 0, 0};
  ASSERT_EQ(fa::check(c), fa::Unsupported::kOk);
  EXPECT_TRUE(fa::plan(c).tma_store);
  c.varlen = 1;
  ASSERT_EQ(fa::check(c), fa::Unsupported::kOk);
  EXPECT_FALSE(fa::plan(c).tma_store);
  // The epilogue's bytes hold no output tile (which here shares the tiles' bytes, so the block's
  // total stays).
  EXPECT_LT(fa::plan(c).smem_epilogue,
            fa::plan(fa::KernelConfig{0, 0, 128, 128, 128, 8, 2, 5, 1, 1, 1, 64, 0, 0, 0, 0}).smem_epilogue);
}

}  // namespace
}  // namespace evo
