#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <thread>

#include "attention/problem.h"
#include "device_limits.h"
#include "errors.h"
#include "search_space.h"
#include "template_registry.h"

namespace evo {
namespace {

// An attention problem as core code holds it, from its text.
Problem problem(std::string_view text) { return attention::to_problem(attention::parse_shape(text)); }

const SearchSpace& space() { return SearchSpace::for_template("fa_s512_v3"); }

// The code of a SCHEDULE label, for Genome::set.
int64_t schedule(const std::string& label) { return space().parse("SCHEDULE=" + label).get("SCHEDULE"); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SearchSpaceTest, LoadsTheRealSpace) {
  const SearchSpace& s = space();
  EXPECT_EQ(s.id(), "fa_s512_v3");
  ASSERT_EQ(s.genes().size(), 13u);
  EXPECT_EQ(s.genes()[0].name, "BLOCK_M");
  EXPECT_EQ(s.genes()[0].values, (std::vector<int64_t>{16, 32, 64, 128}));
  EXPECT_EQ(s.genes()[0].default_value, 32);
  EXPECT_FALSE(s.genes()[0].doc.empty());
  EXPECT_EQ(s.served().at("HEAD_DIM"), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(s.served().at("DTYPE"), (std::vector<int64_t>{0, 1, 2}));
  uint64_t product = 1;
  for (const auto& g : s.genes()) product *= g.values.size();
  EXPECT_EQ(s.size(), product);
  EXPECT_EQ(s.constraint_names(),
            (std::vector<std::string>{"block_m_multiple_of_mma_m", "warps_divide_evenly",
                                      "kv_split_keeps_mma_k", "sync_has_one_stage",
                                      "split_has_keys", "split_counters_fit", "wgmma_needs_sm90a", "wgmma_whole_warpgroups",
                                      "wgmma_n_per_warpgroup", "wide_key_tiles_are_wgmmas", "wgmma_needs_swizzled_async_copies",
                                      "pv_schedules_need_wgmma", "tma_needs_sm90a",
                                      "tma_fills_swizzled_panels", "tma_mma_sync_whole_stages",
                                      "tma_whole_boxes", "box_rows_name_distinct_boxes",
                                      "box_rows_need_tma", "pingpong_two_warpgroups", "warp_specialized_one_or_two_warpgroups",
                                      "staged_store_one_key_group", "qk_ahead_three_stages", "lazy_rescale_not_with_qk_ahead",
                                      "causal_fold_pairs_row_warps", "pack_gqa_not_folded", "longest_first_not_folded",
                                      "persistent_warp_specialized",
                                      "varlen_rows_are_one_sequence", "e4m3_reads_through_tensor_maps",
                                      "shared_memory_fits_device",
                                      "supported_head_dim"}));
}

// Two warpgroups on the keys of 64 rows merge apart from the tiles and store through the tensor
// map; with a staged store (a packed batch, PACK_GQA) every such genome failed compute-sanitizer
// on the H200, so the space refuses them there and keeps them for dense batches.
TEST(SearchSpaceTest, KeyGroupsMergingApartAreRefusedWhereTheOutputIsStaged) {
  const Genome g = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=tma_release_pv");
  EXPECT_EQ(space().violated_constraint(g, problem("1x8x300x128:kv2:causal:bf16"), kDefaultSmemLimit, 90),
            std::nullopt);
  EXPECT_EQ(space().violated_constraint(g, problem("17+300x8x128:kv2:causal:bf16"), kDefaultSmemLimit, 90),
            "staged_store_one_key_group");
  const Genome packed = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=tma,PACK_GQA=1");
  EXPECT_EQ(space().violated_constraint(packed, problem("1x8x300x128:kv2:bf16"), kDefaultSmemLimit, 90),
            "staged_store_one_key_group");
  // One key group stages its output as before.
  const Genome one = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,PACK_GQA=1");
  EXPECT_EQ(space().violated_constraint(one, problem("1x8x300x128:kv2:bf16"), kDefaultSmemLimit, 90), std::nullopt);
}

TEST(SearchSpaceTest, ForTemplateCachesOneInstanceAcrossThreads) {
  std::vector<const SearchSpace*> seen(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { seen[i] = &space(); });
  for (auto& t : threads) t.join();
  for (auto* p : seen) EXPECT_EQ(p, &space());
}

TEST(SearchSpaceTest, UnknownSeed) {
  EXPECT_EQ(error_of([] { SearchSpace::for_template("fa_nope"); }),
            "unknown seed 'fa_nope' (known: fa_s512_v3)");
}

TEST(SearchSpaceTest, LaunchOfDefaultGenome) {
  const Problem p = problem("1x8x512x64");
  const LaunchConfig l = space().launch(space().default_genome(), p);
  EXPECT_EQ(l.grid_x, 16);
  EXPECT_EQ(l.grid_y, 8);
  EXPECT_EQ(l.grid_z, 1);
  EXPECT_EQ(l.threads, 128);
  // SMEM_MAIN = 2 * HEAD_DIM * (BLOCK_M + 2 * STAGES * BLOCK_N); one key group needs no merge.
  EXPECT_EQ(l.smem_bytes, 2 * 64 * (32 + 2 * 2 * 64));
  // Ragged length: the last block is partial.
  EXPECT_EQ(space().launch(space().default_genome(), problem("2x4x1000x64")).grid_x, 32);
  EXPECT_EQ(space().launch(space().default_genome(), problem("2x4x1000x64")).grid_y, 8);
}

TEST(SearchSpaceTest, TmaGenomesAskForTensorMapsOfTheirBoxAndRoomForTheirBarriers) {
  const Problem p = problem("1x8x512x64");
  EXPECT_EQ(space().launch(space().default_genome(), p).tensor_map_box_rows, 0);
  const Genome cp_async = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1");
  Genome tma = cp_async;
  tma.set("SCHEDULE", schedule("tma"));
  Genome small_boxes = tma;
  small_boxes.set("TMA_BOX_ROWS", 32);
  const LaunchConfig a = space().launch(cp_async, p), b = space().launch(tma, p);
  EXPECT_EQ(a.tensor_map_box_rows, 0);
  EXPECT_EQ(b.tensor_map_box_rows, 64);
  EXPECT_EQ(space().launch(small_boxes, p).tensor_map_box_rows, 32);
  EXPECT_EQ(space().launch(small_boxes, p).smem_bytes, b.smem_bytes);
  // Two 8-byte mbarriers per stage (full, empty) and one for Q, in a 128-byte slot after the tiles.
  EXPECT_EQ(b.smem_bytes, a.smem_bytes + 128);
  EXPECT_EQ(space().violated_constraint(tma, p, kDefaultSmemLimit, 90), std::nullopt);
  // One box size for all four maps unless a tile is shorter than the box.
  EXPECT_EQ(b.tensor_map_q_box_rows, 64);
  EXPECT_EQ(space().launch(small_boxes, p).tensor_map_q_box_rows, 32);
}

// A persistent warp-specialized schedule on a dense batch: its launch is persistent (the plan's
// too; kernel_plan_test holds the two against each other) and its grid_x * grid_y are work tiles.
TEST(SearchSpaceTest, APersistentLaunchCountsWorkTiles) {
  const Problem p = problem("2x16x4096x128");
  const Genome two = space().parse(
      "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
      "TMA_BOX_ROWS=256");
  ASSERT_EQ(space().violated_constraint(two, p, kDefaultSmemLimit, 90), std::nullopt);
  const LaunchConfig l = space().launch(two, p);
  EXPECT_EQ(l.persistent, 1);
  EXPECT_EQ(l.grid_x * l.grid_y, 32 * 32);
  Genome one_per_tile = two;
  one_per_tile.set("SCHEDULE", 11);
  EXPECT_EQ(space().launch(one_per_tile, p).persistent, 0);
  EXPECT_EQ(space().launch(space().default_genome(), p).persistent, 0);
}

// The persistent schedules are refused by name where a block cannot take work tile after work
// tile: a packed batch, PACK_GQA, and four 192-key e4m3 stages (no room for the output tile past
// them, which Q cannot hold).
TEST(SearchSpaceTest, PersistentSchedulesNeedADenseBatch) {
  const std::string rule = "persistent_warp_specialized";
  const Genome two = space().parse(
      "BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized_pingpong_persistent,"
      "TMA_BOX_ROWS=256");
  EXPECT_EQ(space().violated_constraint(two, problem("300+4096x16x128"), kDefaultSmemLimit, 90), rule);
  Genome grouped = two;
  grouped.set("PACK_GQA", 1);
  EXPECT_EQ(space().violated_constraint(grouped, problem("2x16x4096x128:kv4"), kDefaultSmemLimit, 90), rule);
  Genome e4m3 = two;
  e4m3.set("BLOCK_N", 192);
  e4m3.set("STAGES", 3);
  EXPECT_EQ(space().violated_constraint(e4m3, problem("2x16x4096x128:e4m3"), kDefaultSmemLimit, 90), std::nullopt)
      << "three e4m3 stages: the output tile apart";
  e4m3.set("STAGES", 4);
  EXPECT_EQ(space().violated_constraint(e4m3, problem("2x16x4096x128:e4m3"), kDefaultSmemLimit, 90), rule);
  e4m3.set("SCHEDULE", 11);
  EXPECT_EQ(space().violated_constraint(e4m3, problem("2x16x4096x128:e4m3"), kDefaultSmemLimit, 90), std::nullopt)
      << "one block per work tile";
}

TEST(SearchSpaceTest, BoxesTallerThanATileAreCutToItsRows) {
  const Problem p = problem("1x4x1000x64");
  // 256: every tile one box per 64 columns, K and V (BLOCK_N rows) taller than Q and O.
  const Genome whole = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,WGMMA=1,SCHEDULE=tma,TMA_BOX_ROWS=256");
  EXPECT_EQ(space().violated_constraint(whole, p, kDefaultSmemLimit, 90), std::nullopt);
  EXPECT_EQ(space().launch(whole, p).tensor_map_box_rows, 128);
  EXPECT_EQ(space().launch(whole, p).tensor_map_q_box_rows, 64);
  // 64 under a 32-row Q tile: Q's boxes are 32 rows, K's and V's 64.
  const Genome q_short = space().parse("BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,SCHEDULE=tma,TMA_BOX_ROWS=64");
  EXPECT_EQ(space().violated_constraint(q_short, p, kDefaultSmemLimit, 90), std::nullopt);
  EXPECT_EQ(space().launch(q_short, p).tensor_map_box_rows, 64);
  EXPECT_EQ(space().launch(q_short, p).tensor_map_q_box_rows, 32);
  // Shared memory does not depend on the boxes.
  Genome small_boxes = whole;
  small_boxes.set("TMA_BOX_ROWS", 32);
  EXPECT_EQ(space().launch(whole, p).smem_bytes, space().launch(small_boxes, p).smem_bytes);
}

TEST(SearchSpaceTest, MergeBufferCanDominateSharedMemory) {
  // BLOCK_M=64, WARPS=8, BLOCK_N=32, STAGES=1: WARPS_M=4, WARPS_KV=2; key group 1 hands key
  // group 0 its fragments, 4 * 64 * (64 + 8) bytes, more than the main tiles (2*64*(64+2*32)).
  Genome g = space().parse("BLOCK_M=64,BLOCK_N=32,WARPS=8,STAGES=1,SCHEDULE=sync");
  EXPECT_EQ(space().launch(g, problem("1x8x512x64")).smem_bytes, 4 * 64 * 72);
  auto vars = space().variables(g, problem("1x8x512x64"), 1000);
  EXPECT_EQ(vars.at("WARPS_M"), 4);
  EXPECT_EQ(vars.at("WARPS_KV"), 2);
  EXPECT_EQ(vars.at("SMEM_LIMIT"), 1000);
  EXPECT_EQ(vars.at("HEAD_DIM"), 64);
}

TEST(SearchSpaceTest, OutputTileAfterTheMergeBufferCountsInSharedMemory) {
  // wgmma with TMA stores its output through a tile after the merge buffer. BLOCK_M=128,
  // WARPS=16, one 64-key stage: WARPS_KV=2, so there is a buffer (4 * 128 * (64 + 8) bytes) and
  // the tile (2 * 128 * 64) besides the main tiles (2 * 64 * (128 + 2 * 64)); plus the 1024-byte
  // alignment slack and TMA's barriers.
  const Problem p = problem("1x8x512x64");
  Genome g = space().parse("BLOCK_M=128,BLOCK_N=64,WARPS=16,STAGES=1,WGMMA=1,SCHEDULE=tma");
  // The key groups merge in a TMA block that fits 227 KB: the buffer and the tile lie past the
  // main tiles instead of over them.
  EXPECT_EQ(space().launch(g, p).smem_bytes,
            2 * 64 * (128 + 2 * 64) + 4 * 128 * 72 + 2 * 128 * 64 + 1024 + 128);
  // Over 227 KB they overlay the main tiles again: four 128-key stages at head dim 128.
  Genome big = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,WGMMA=1,SCHEDULE=tma");
  const Problem p128 = problem("1x8x512x128");
  EXPECT_EQ(space().launch(big, p128).smem_bytes, 2 * 128 * (64 + 2 * 4 * 128) + 1024 + 128);
  // Without TMA the output is staged over the merge buffer itself.
  Genome staged = space().parse("BLOCK_M=128,BLOCK_N=64,WARPS=16,STAGES=1,WGMMA=1");
  EXPECT_EQ(space().launch(staged, p).smem_bytes, 4 * 128 * 72 + 1024);
}

TEST(SearchSpaceTest, KernelName) {
  EXPECT_EQ(space().kernel_name(space().default_genome(), problem("1x8x512x64")),
            "evo::fa_s512_v3_kernel<0, 0, 64, 32, 64, 4, 2, 1, 1, 1, 0, 64, 0, 0, 0, 0, 0>");
  EXPECT_EQ(space().kernel_name(space().parse("BLOCK_M=128,SWIZZLE=0"), problem("1x8x512x128:causal")),
            "evo::fa_s512_v3_kernel<0, 1, 128, 128, 64, 4, 2, 1, 0, 1, 0, 64, 0, 0, 0, 0, 0>");
}

TEST(SearchSpaceTest, FlopsFromTheSpace) {
  EXPECT_DOUBLE_EQ(space().flops(space().default_genome(), problem("1x8x512x64")),
                   4.0 * 8 * 512 * 512 * 64);
  EXPECT_DOUBLE_EQ(space().flops(space().default_genome(), problem("1x8x512x64:causal")),
                   2.0 * 8 * 512 * 512 * 64);
}

TEST(SearchSpaceTest, SizeAndAtCoverEveryGenomeOnce) {
  std::set<std::string> texts;
  for (uint64_t i = 0; i < space().size(); ++i) {
    Genome g = space().at(i);
    for (const auto& gene : space().genes()) {
      const auto& v = gene.values;
      EXPECT_NE(std::find(v.begin(), v.end(), g.get(gene.name)), v.end());
    }
    texts.insert(g.text());
  }
  EXPECT_EQ(texts.size(), space().size());
  // First gene slowest, last fastest.
  EXPECT_EQ(space().at(0).genes_text(),
            "BLOCK_M=16,BLOCK_N=32,WARPS=1,STAGES=1,SCHEDULE=sync,SWIZZLE=0,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
  EXPECT_EQ(space().at(1).genes_text(),
            "BLOCK_M=16,BLOCK_N=32,WARPS=1,STAGES=1,SCHEDULE=sync,SWIZZLE=0,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=1");
  Genome last = space().at(space().size() - 1);
  for (const auto& gene : space().genes()) EXPECT_EQ(last.get(gene.name), gene.values.back());
  EXPECT_THROW(space().at(space().size()), std::out_of_range);
}

TEST(SearchSpaceTest, DefaultGenomeIsValid) {
  EXPECT_EQ(space().violated_constraint(space().default_genome(), problem("1x8x512x64"), kDefaultSmemLimit),
            std::nullopt);
}

// Each constraint of the real space, violated by a genome built for it.
TEST(SearchSpaceTest, EveryConstraintRejectsItsViolation) {
  const Problem p = problem("1x8x512x64");
  const int64_t limit = kDefaultSmemLimit;
  auto with = [](std::vector<std::pair<std::string, int64_t>> changes) {
    Genome g = space().default_genome();
    for (const auto& [n, v] : changes) g.set(n, v);
    return g;
  };
  auto violated = [&](const Genome& g, const Problem& shape, int64_t smem) {
    return space().violated_constraint(g, shape, smem).value_or("(valid)");
  };
  // Out of the domain on purpose: the constraint must still catch it.
  EXPECT_EQ(violated(with({{"BLOCK_M", 40}}), p, limit), "block_m_multiple_of_mma_m");
  // BLOCK_M=48 with 2 warps: WARPS_M=2 but 48 rows are not 2 whole 16-row tiles each.
  EXPECT_EQ(violated(with({{"BLOCK_M", 48}, {"WARPS", 2}}), p, limit), "warps_divide_evenly");
  // 16 rows, 8 warps: 8-way key split of 32 keys leaves 4 keys per warp.
  EXPECT_EQ(violated(with({{"BLOCK_M", 16}, {"WARPS", 8}, {"BLOCK_N", 32}}), p, limit),
            "kv_split_keeps_mma_k");
  const int64_t sync = schedule("sync"), tma_sync = schedule("tma");
  EXPECT_EQ(violated(with({{"STAGES", 2}, {"SCHEDULE", sync}}), p, limit), "sync_has_one_stage");
  // wgmma reads swizzled tiles an asynchronous copy fills.
  EXPECT_EQ(violated(with({{"BLOCK_M", 64}, {"WGMMA", 1}, {"STAGES", 1}, {"SCHEDULE", sync}}), p, limit),
            "wgmma_needs_swizzled_async_copies");
  EXPECT_EQ(violated(with({{"BLOCK_M", 64}, {"WGMMA", 1}, {"SWIZZLE", 0}}), p, limit),
            "wgmma_needs_swizzled_async_copies");
  EXPECT_EQ(violated(with({{"SCHEDULE", schedule("cp_async_pv")}}), p, limit), "pv_schedules_need_wgmma");
  EXPECT_EQ(violated(with({{"BLOCK_M", 64}, {"WGMMA", 1}, {"SCHEDULE", schedule("cp_async_pv")}}), p, limit),
            "(valid)");
  EXPECT_EQ(violated(with({{"BLOCK_M", 64}, {"WGMMA", 1}, {"STAGES", 1}, {"SCHEDULE", schedule("cp_async_pv")}}),
                     p, limit),
            "pv_schedules_need_wgmma");
  // TMA under mma.sync: swizzled panels, whole stages, boxes of 32 rows or more; a box value
  // taller than both tiles names the same boxes as a smaller one.
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"SWIZZLE", 0}}), p, limit), "tma_fills_swizzled_panels");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"STAGES", 1}}), p, limit), "tma_mma_sync_whole_stages");
  EXPECT_EQ(violated(with({{"SCHEDULE", schedule("tma_release")}}), p, limit), "tma_mma_sync_whole_stages");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"BLOCK_M", 16}, {"WARPS", 1}}), p, limit), "tma_whole_boxes");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}}), p, limit), "(valid)");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"TMA_BOX_ROWS", 32}}), p, limit), "(valid)");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"BLOCK_N", 32}}), p, limit), "box_rows_name_distinct_boxes");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"TMA_BOX_ROWS", 256}}), p, limit), "box_rows_name_distinct_boxes");
  EXPECT_EQ(violated(with({{"SCHEDULE", tma_sync}, {"TMA_BOX_ROWS", 256}, {"BLOCK_N", 128}}), p, limit), "(valid)");
  const std::vector<std::pair<std::string, int64_t>> tma = {
      {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"WGMMA", 1}, {"SCHEDULE", tma_sync}};
  auto tma_with = [&](std::vector<std::pair<std::string, int64_t>> more) {
    more.insert(more.begin(), tma.begin(), tma.end());
    return with(more);
  };
  EXPECT_EQ(violated(tma_with({}), p, limit), "(valid)");
  EXPECT_EQ(violated(tma_with({{"SCHEDULE", schedule("tma_release")}, {"STAGES", 1}}), p, limit), "(valid)");
  EXPECT_EQ(violated(tma_with({{"BLOCK_N", 32}}), p, limit), "(valid)");
  EXPECT_EQ(violated(tma_with({{"BLOCK_N", 32}, {"TMA_BOX_ROWS", 32}}), p, limit), "(valid)");
  EXPECT_EQ(violated(tma_with({{"TMA_BOX_ROWS", 256}}), p, limit), "box_rows_name_distinct_boxes");
  EXPECT_EQ(violated(with({{"TMA_BOX_ROWS", 32}}), p, limit), "box_rows_need_tma");
  // pingpong: two warpgroups of 64 rows each; with one, it is not valid.
  const std::vector<std::pair<std::string, int64_t>> pingpong = {
      {"BLOCK_M", 128}, {"WARPS", 8}, {"STAGES", 3}, {"SCHEDULE", schedule("pingpong")}};
  EXPECT_EQ(violated(tma_with(pingpong), p, limit), "(valid)");
  auto one_warpgroup = pingpong;
  one_warpgroup.insert(one_warpgroup.end(), {{"WARPS", 4}, {"BLOCK_M", 64}});
  EXPECT_EQ(violated(tma_with(one_warpgroup), p, limit), "pingpong_two_warpgroups");
  // qk_ahead: the 2,8 winner's block (four stages) takes it; two stages do not.
  for (const char* ahead_schedule : {"qk_ahead", "qk_ahead_release"}) {
    const std::vector<std::pair<std::string, int64_t>> ahead = {
        {"BLOCK_N", 128}, {"WARPS", 8}, {"STAGES", 4}, {"SCHEDULE", schedule(ahead_schedule)}};
    EXPECT_EQ(violated(tma_with(ahead), p, limit), "(valid)") << ahead_schedule;
    auto two_stages = ahead;
    two_stages.emplace_back("STAGES", 2);
    EXPECT_EQ(violated(tma_with(two_stages), p, limit), "qk_ahead_three_stages") << ahead_schedule;
    // LAZY_RESCALE: not beside qk_ahead.
    auto lazy = ahead;
    lazy.emplace_back("LAZY_RESCALE", 1);
    EXPECT_EQ(violated(tma_with(lazy), p, limit), "lazy_rescale_not_with_qk_ahead") << ahead_schedule;
    lazy.emplace_back("SCHEDULE", schedule("tma_pv"));
    EXPECT_EQ(violated(tma_with(lazy), p, limit), "(valid)") << ahead_schedule;
  }
  EXPECT_EQ(violated(with({{"LAZY_RESCALE", 1}}), p, limit), "(valid)");
  // CAUSAL_FOLD: mma.sync blocks with an even number of row warps, unsplit.
  EXPECT_EQ(violated(with({{"CAUSAL_FOLD", 1}}), p, limit), "(valid)");  // 32 rows, 2 row warps
  EXPECT_EQ(violated(with({{"CAUSAL_FOLD", 1}, {"BLOCK_M", 16}}), p, limit),
            "causal_fold_pairs_row_warps");
  EXPECT_EQ(violated(with({{"CAUSAL_FOLD", 1}, {"SPLIT_KV", 2}}), p, limit),
            "causal_fold_pairs_row_warps");
  EXPECT_EQ(violated(tma_with({{"BLOCK_M", 64}, {"CAUSAL_FOLD", 1}}), p, limit),
            "causal_fold_pairs_row_warps");
  EXPECT_EQ(violated(space().default_genome(), p, 36863), "shared_memory_fits_device");
  EXPECT_EQ(violated(space().default_genome(), p, 36864), "(valid)");
  EXPECT_EQ(violated(with({{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"STAGES", 3}}),
                     problem("1x8x512x128"), 99 * 1024),
            "shared_memory_fits_device");
  EXPECT_EQ(violated(space().default_genome(), problem("1x8x512x96"), limit), "supported_head_dim");
  // A packed batch's rows are one sequence, found at run time: neither folded nor packed by group.
  const Problem packed = problem("17+300x8x64:kv2:causal");
  EXPECT_EQ(violated(with({{"CAUSAL_FOLD", 1}}), packed, limit), "varlen_rows_are_one_sequence");
  EXPECT_EQ(violated(with({{"PACK_GQA", 1}}), packed, limit), "varlen_rows_are_one_sequence");
  EXPECT_EQ(violated(with({{"PACK_GQA", 1}}), problem("1x8x300x64:kv2:causal"), limit), "(valid)");
  // LONGEST_FIRST orders blocks whose work differs: not folded ones.
  EXPECT_EQ(violated(with({{"LONGEST_FIRST", 1}}), p, limit), "(valid)");
  EXPECT_EQ(violated(with({{"LONGEST_FIRST", 1}, {"CAUSAL_FOLD", 1}}), p, limit),
            "longest_first_not_folded");
}

// violated_constraint() evaluates the constraints on slots bound at load; variables() and the
// formulas evaluate them by name. Both name the same first violated constraint for every sampled
// genome, dense and packed, on each target.
TEST(SearchSpaceTest, SlotBoundChecksAgreeWithTheFormulasByName) {
  const auto constraints = space().constraints();
  int compared = 0, valid = 0;
  for (uint64_t i = 0; i < space().size(); i += 331) {
    const Genome g = space().at(i);
    for (const char* text : {"2x8x1000x64:causal", "1x32x1x4096x128:kv8:bf16", "17+3000/3000x32x128:kv8:causal"})
      for (int arch : {80, 90}) {
        const Problem p = problem(text);
        const auto vars = space().variables(g, p, kDefaultSmemLimit, arch);
        std::optional<std::string> by_name;
        for (const auto& c : constraints)
          if (c.expr.eval(vars) == 0) {
            by_name = c.name;
            break;
          }
        ASSERT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit, arch), by_name) << g.text() << " at " << text;
        ++compared;
        valid += !by_name.has_value();
      }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(valid, 10);
}

// A gene that no shape of a run uses names no kernel of its own there: canonical() sets it to its
// default, and the launch of either value asks for the same shared memory.
TEST(SearchSpaceTest, CanonicalSetsGenesNoShapeUsesToTheirDefaults) {
  const Genome folded = space().parse("BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,LAZY_RESCALE=1,CAUSAL_FOLD=1");
  const Genome unfolded = space().parse("BLOCK_M=32,BLOCK_N=256,WARPS=8,STAGES=2,LAZY_RESCALE=1");
  const Problem plain = problem("1x8x512x64"), causal = problem("1x8x512x64:causal");

  EXPECT_EQ(space().canonical(folded, {plain}), unfolded);
  EXPECT_EQ(space().canonical(folded, {plain, problem("2x8x512x64")}), unfolded);
  EXPECT_EQ(space().canonical(folded, {causal}), folded);
  EXPECT_EQ(space().canonical(folded, {plain, causal}), folded);  // one causal shape uses it
  EXPECT_EQ(space().canonical(folded, {}), folded);               // no shapes: nothing is known unused
  EXPECT_EQ(space().canonical(unfolded, {plain}), unfolded);
  // LAZY_RESCALE has no used_when: kept at 1 for every shape.
  EXPECT_EQ(space().canonical(folded, {plain}).get("LAZY_RESCALE"), 1);
  // A genome of another space passes through.
  const Genome other("tiny", {{"A", 4}});
  EXPECT_EQ(space().canonical(other, {plain}), other);

  EXPECT_EQ(space().launch(folded, plain).smem_bytes, space().launch(unfolded, plain).smem_bytes);
  EXPECT_EQ(space().launch(folded, causal).smem_bytes,
            space().launch(unfolded, causal).smem_bytes + 32 * 64 * 2);  // the second Q tile
  const auto& genes = space().genes();
  ASSERT_GE(genes.size(), 2u);
  EXPECT_EQ(genes[genes.size() - 2].name, "PACK_GQA");
  EXPECT_EQ(genes[genes.size() - 2].used_when, "HEADS_KV < HEADS && VARLEN == 0");
  // LONGEST_FIRST orders causal blocks only: a non-causal run keeps it at its default.
  EXPECT_EQ(genes.back().name, "LONGEST_FIRST");
  EXPECT_EQ(genes.back().used_when, "CAUSAL == 1");
  const Genome longest = space().parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,LONGEST_FIRST=1");
  EXPECT_EQ(space().canonical(longest, {plain}).get("LONGEST_FIRST"), 0);
  EXPECT_EQ(space().canonical(longest, {causal}).get("LONGEST_FIRST"), 1);
  // A packed batch uses neither the fold nor the group packing.
  const Genome packed_both = space().parse("BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,CAUSAL_FOLD=1,PACK_GQA=1");
  EXPECT_EQ(space().canonical(packed_both, {problem("17+300x8x64:kv2:causal")}),
            space().parse("BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2"));
}

TEST(SearchSpaceTest, ParseAcceptsPrefixSpacesAndDefaults) {
  Genome g = space().parse(" fa_s512_v3 : BLOCK_M = 64 , WARPS=8 ");
  EXPECT_EQ(g.text(), "fa_s512_v3:BLOCK_M=64,BLOCK_N=64,WARPS=8,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
  EXPECT_EQ(space().parse("SWIZZLE=0,BLOCK_M=16").genes_text(),
            "BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=0,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
  EXPECT_EQ(space().parse(""), space().default_genome());
  EXPECT_EQ(space().parse("fa_s512_v3:"), space().default_genome());
}

TEST(SearchSpaceTest, ParseErrors) {
  auto parse_error = [](const std::string& t) { return error_of([&] { space().parse(t); }); };
  EXPECT_EQ(parse_error("FOO=1"),
            "unknown gene 'FOO' (genes: BLOCK_M, BLOCK_N, WARPS, STAGES, SCHEDULE, SWIZZLE, SPLIT_KV, "
            "WGMMA, TMA_BOX_ROWS, LAZY_RESCALE, CAUSAL_FOLD, PACK_GQA, LONGEST_FIRST)");
  EXPECT_EQ(parse_error("BLOCK_M=48"), "BLOCK_M=48 is outside its domain {16, 32, 64, 128}");
  EXPECT_EQ(parse_error("BLOCK_M=-16"), "BLOCK_M=-16 is outside its domain {16, 32, 64, 128}");
  for (const char* bad : {"BLOCK_M", "BLOCK_M=", "=32", "BLOCK_M=32,", ",BLOCK_M=32", "BLOCK_M=32,,WARPS=4",
                          "BLOCK_M=3 2", "BLOCK_M=0x20", "BLOCK_M=32;WARPS=4", "BLOCK_M=99999999999999999999"})
    EXPECT_EQ(parse_error(bad), "malformed genome '" + std::string(bad) + "': expected NAME=VALUE,...");
  EXPECT_EQ(parse_error("other:BLOCK_M=32"), "genome is for template 'other', not 'fa_s512_v3'");
  EXPECT_EQ(parse_error("BLOCK_M=32,BLOCK_M=64"),
            "gene 'BLOCK_M' is given twice in genome 'BLOCK_M=32,BLOCK_M=64'");
}

TEST(SearchSpaceTest, GenomeOfAnotherShapeIsRejectedByQueries) {
  Genome alien("fa_s512_v3", {{"BLOCK_M", 32}});
  EXPECT_THROW(space().violated_constraint(alien, problem("1x8x512x64"), 1 << 20), InputError);
  EXPECT_THROW(space().launch(Genome("other", space().default_genome().genes()), problem("1x8x512x64")),
               InputError);
}

// --- from_json over malformed variants of a small valid space ---

const char kSmallSpace[] = R"({
  "template": "tiny",
  "serves": {"HEAD_DIM": [64], "DTYPE": ["fp16"]},
  "genes": [
    {"name": "A", "values": [1, 2, 4], "default": 2},
    {"name": "B", "values": [0, 1], "default": 0}
  ],
  "derived": [{"name": "AB", "expr": "A * 10 + B"}],
  "constraints": [{"name": "small", "expr": "AB < 40"}],
  "kernel": "k<{A}, {B}, {HEAD_DIM}>",
  "launch": {"threads": "A * 32", "grid_x": "SEQ_Q / 64", "grid_y": "BATCH * HEADS", "grid_z": "1",
             "smem_bytes": "AB"}
})";

std::string with_replaced(const std::string& from, const std::string& to) {
  std::string s = kSmallSpace;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST(SearchSpaceJsonTest, SmallSpaceLoadsAndWorks) {
  SearchSpace s = SearchSpace::from_json(kSmallSpace);
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(s.kernel_name(s.parse("A=4,B=1"), problem("1x8x512x64")), "k<4, 1, 64>");
  EXPECT_EQ(s.violated_constraint(s.parse("A=4,B=1"), problem("1x8x512x64"), 0), "small");
  EXPECT_EQ(s.violated_constraint(s.parse("A=2,B=1"), problem("1x8x512x64"), 0), std::nullopt);
  EXPECT_EQ(s.launch(s.parse("A=4"), problem("1x8x512x64")).threads, 128);
  // No "flops": the shape's own count.
  EXPECT_DOUBLE_EQ(s.flops(s.default_genome(), problem("1x8x512x64")), problem("1x8x512x64").flops());
}

TEST(SearchSpaceJsonTest, UsedWhenReadsTheProblem) {
  SearchSpace s = SearchSpace::from_json(
      with_replaced(R"({"name": "B", "values": [0, 1], "default": 0})",
                    R"({"name": "B", "values": [0, 1], "default": 0, "used_when": "SEQ_K > 512 || CAUSAL"})"));
  EXPECT_EQ(s.genes()[1].used_when, "SEQ_K > 512 || CAUSAL");
  const Genome g = s.parse("A=4,B=1");
  EXPECT_EQ(s.canonical(g, {problem("1x1x512x64")}).text(), "tiny:A=4,B=0");
  EXPECT_EQ(s.canonical(g, {problem("1x1x1024x64")}).text(), "tiny:A=4,B=1");
  EXPECT_EQ(s.canonical(g, {problem("1x1x512x64:causal")}).text(), "tiny:A=4,B=1");
}

// DTYPE is a problem variable like CAUSAL: 0 for fp16, 1 for bf16, in names, formulas, constraints
// and used_when.
TEST(SearchSpaceJsonTest, DtypeIsBoundFromTheShape) {
  SearchSpace s = SearchSpace::from_json(with_replaced(R"("kernel": "k<{A}, {B}, {HEAD_DIM}>")",
                                                       R"("kernel": "k<{DTYPE}, {A}, {B}, {HEAD_DIM}>")"));
  const Genome g = s.parse("A=2,B=1");
  EXPECT_EQ(s.kernel_name(g, problem("1x1x512x64")), "k<0, 2, 1, 64>");
  EXPECT_EQ(s.kernel_name(g, problem("1x1x512x64:bf16")), "k<1, 2, 1, 64>");
  EXPECT_EQ(s.variables(g, problem("1x1x512x64:bf16"), 0).at("DTYPE"), 1);
  SearchSpace used = SearchSpace::from_json(
      with_replaced(R"({"name": "B", "values": [0, 1], "default": 0})",
                    R"({"name": "B", "values": [0, 1], "default": 0, "used_when": "DTYPE == 1"})"));
  EXPECT_EQ(used.canonical(g, {problem("1x1x512x64")}).text(), "tiny:A=2,B=0");
  EXPECT_EQ(used.canonical(g, {problem("1x1x512x64:bf16")}).text(), "tiny:A=2,B=1");
}

// A space lists the head dims and dtypes its kernel is written for; a problem of another is
// refused in one line naming what it serves.
TEST(SearchSpaceJsonTest, ServesItsHeadDimsAndDtypesOnly) {
  const SearchSpace fp16_only = SearchSpace::from_json(kSmallSpace);
  EXPECT_EQ(fp16_only.served().at("DTYPE"), (std::vector<int64_t>{0}));
  EXPECT_NO_THROW(fp16_only.require_serves(problem("1x1x512x64"), "1x1x512x64"));
  try {
    fp16_only.require_serves(problem("1x1x512x64:bf16"), "1x1x512x64:bf16");
    ADD_FAILURE() << "bf16 served by a space that does not list it";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "shape '1x1x512x64:bf16': dtype bf16 is not served by tiny (it serves fp16)");
  }
  try {
    fp16_only.require_serves(problem("1x1x512x96"), "1x1x512x96");
    ADD_FAILURE() << "head_dim 96 served";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "shape '1x1x512x96': head_dim 96 is not served by tiny (it serves 64)");
  }
  std::string two = with_replaced(R"("DTYPE": ["fp16"])", R"("DTYPE": ["bf16", "fp16"])");
  two.replace(two.find("k<{A}"), 5, "k<{DTYPE}, {A}");
  const SearchSpace both = SearchSpace::from_json(two);
  EXPECT_EQ(both.served().at("DTYPE"), (std::vector<int64_t>{1, 0}));
  EXPECT_NO_THROW(both.require_serves(problem("1x1x512x64:bf16"), "1x1x512x64:bf16"));
}

TEST(SearchSpaceJsonTest, RejectsMalformedVariants) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[1, 2]", "must be a JSON object"},
      {with_replaced(R"("template": "tiny",)", ""), "lacks \"template\""},
      {with_replaced(R"("template": "tiny")", R"("template": 7)"), "template must be a non-empty string"},
      {with_replaced(R"("serves": {"HEAD_DIM": [64], "DTYPE": ["fp16"]},)", ""), "lacks \"serves\""},
      {with_replaced(R"("serves": {"HEAD_DIM": [64], "DTYPE": ["fp16"]})", R"("serves": [64])"),
       "serves must be an object listing the values of HEAD_DIM, DTYPE"},
      {with_replaced(R"("HEAD_DIM": [64])", R"("HEAD_DIM": [])"), "serves.HEAD_DIM must be a non-empty array"},
      {with_replaced(R"("HEAD_DIM": [64], )", ""),
       "serves must list HEAD_DIM (the attention family's kernels each name the values of HEAD_DIM, DTYPE they serve)"},
      {with_replaced(R"("HEAD_DIM": [64])", R"("HEAD_DIM": [64], "WIDTH": [2])"),
       "serves names 'WIDTH', which is not a variable of the attention problem"},
      {with_replaced(R"("DTYPE": ["fp16"])", R"("DTYPE": [true])"), "serves.DTYPE[] must be numbers or labels"},
      {with_replaced(R"("DTYPE": ["fp16"])", R"("DTYPE": ["fp16", "fp8"])"),
       "bad search space: serves.DTYPE: unknown dtype 'fp8': expected fp16, bf16 or e4m3"},
      {with_replaced(R"("HEAD_DIM": [64])", R"("HEAD_DIM": ["wide"])"),
       "bad search space: serves.HEAD_DIM: HEAD_DIM takes numbers, not 'wide'"},
      {with_replaced(R"("DTYPE": ["fp16"])", R"("DTYPE": ["fp16", "bf16"])"),
       "a kernel that serves more than one DTYPE must name {DTYPE} in its kernel pattern"},
      {with_replaced(R"({"name": "B", "values": [0, 1], "default": 0})", R"({"name": "A", "values": [0, 1], "default": 0})"),
       "gene name 'A' is defined twice"},
      {with_replaced(R"("default": 2})", R"("default": 3})"), "gene A default 3 is outside its domain {1, 2, 4}"},
      {with_replaced(R"("values": [1, 2, 4])", R"("values": [])"), "genes[0].values must be a non-empty array"},
      {with_replaced(R"("values": [1, 2, 4])", R"("values": [1, 2, 2])"), "gene A lists 2 twice"},
      {with_replaced(R"("values": [1, 2, 4])", R"("values": [1, 2.5, 4])"), "must be an integer"},
      {with_replaced(R"({"name": "A",)", R"({"name": "A-1",)"), "is not an identifier"},
      {with_replaced(R"({"name": "A",)", R"({"name": "SEQ_Q",)"), "gene name 'SEQ_Q' is defined twice"},
      {with_replaced(R"("name": "AB")", R"("name": "B")"), "derived value name 'B' is defined twice"},
      {with_replaced(R"("AB < 40")", R"("AB < ")"), "constraint small: bad expression 'AB < '"},
      {with_replaced(R"("AB < 40")", R"("AC < 40")"), "constraint small reads unknown identifier 'AC'"},
      {with_replaced(R"("A * 10 + B")", R"("A * 10 + AB")"), "reads unknown identifier 'AB'"},
      {with_replaced(R"({HEAD_DIM})", R"({HEADDIM})"), "unknown placeholder '{HEADDIM}'"},
      // used_when reads the problem only: not genes, derived values or the device.
      {with_replaced(R"("default": 0})", R"("default": 0, "used_when": "A > 1"})"),
       "gene B used_when reads unknown identifier 'A'"},
      {with_replaced(R"("default": 0})", R"("default": 0, "used_when": "SMEM_LIMIT > 0"})"),
       "gene B used_when reads unknown identifier 'SMEM_LIMIT'"},
      {with_replaced(R"("default": 0})", R"("default": 0, "used_when": "CAUSAL =="})"),
       "gene B used_when: bad expression"},
      {with_replaced(R"("default": 0})", R"("default": 0, "used_when": 1})"),
       "gene B used_when must be an expression string"},
      {with_replaced(R"({HEAD_DIM}>)", R"({HEAD_DIM>)"), "unclosed '{'"},
      {with_replaced(R"("grid_z": "1",)", ""), "launch lacks \"grid_z\""},
      {with_replaced(R"("grid_z": "1",)", R"("grid_z": "1", "tensor_map_q_box_rows": "32",)"),
       "launch.tensor_map_q_box_rows needs launch.tensor_map_box_rows"},
      {with_replaced(R"("grid_z": "1",)", R"("grid_z": "1", "workspace_zeroed_bytes": "64",)"),
       "launch.workspace_zeroed_bytes needs launch.workspace_bytes"},
      {with_replaced(R"("genes": [)", R"("genes": 5, "x": [)"), "genes must be a non-empty array"},
      {with_replaced(R"("constraints": [{"name": "small", "expr": "AB < 40"}])",
                     R"("constraints": [{"name": "small", "expr": "1"}, {"name": "small", "expr": "1"}])"),
       "constraint 'small' is defined twice"},
  };
  for (const auto& [json, message] : cases) {
    std::string what = error_of([&] { SearchSpace::from_json(json); });
    EXPECT_NE(what.find(message), std::string::npos) << "expected '" << message << "', got: " << what;
    EXPECT_EQ(what.rfind("bad search space: ", 0), 0u) << what;
  }
}

// An enumerated gene (labels) that replaced a retired integer gene (OLD_B), as fa_s512_v3's SCHEDULE
// replaced six booleans.
const char kLabelledSpace[] = R"({
  "template": "tiny",
  "serves": {"HEAD_DIM": [64], "DTYPE": ["fp16"]},
  "genes": [
    {"name": "A", "values": [1, 2], "default": 1},
    {"name": "MODE", "labels": ["slow", "fast", "faster"], "default": "fast"}
  ],
  "derived": [{"name": "OLD_B", "expr": "MODE"}, {"name": "OLD_C", "expr": "MODE == 2"}],
  "retired_genes": [{"name": "OLD_B", "default": 1, "into": "MODE"}, {"name": "OLD_C", "default": 0, "into": "MODE"}],
  "constraints": [],
  "kernel": "k<{A}, {MODE}>",
  "launch": {"threads": "32", "grid_x": "1", "grid_y": "1", "grid_z": "1", "smem_bytes": "0"}
})";

std::string labelled_with(const std::string& from, const std::string& to) {
  std::string s = kLabelledSpace;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

// A value added after its genes retired may repeat an older value's retired genes (SCHEDULE's
// warp-specialized values run the mainloops of older ones): "into_values" keeps old texts on the
// older value, an old text that matches none is told only the values it could have meant, and bad
// counts are refused.
TEST(SearchSpaceJsonTest, ValuesAddedAfterTheRetiredGenesAreNotNamedByThem) {
  const std::string grown = labelled_with(
      R"("labels": ["slow", "fast", "faster"])", R"("labels": ["slow", "fast", "faster", "fastest"])");
  auto with_into_values = [&](const std::string& n) {
    std::string s = grown;
    for (const char* gene : {"\"OLD_B\", \"default\": 1, \"into\": \"MODE\"", "\"OLD_C\", \"default\": 0, \"into\": \"MODE\""}) {
      const auto pos = s.find(gene);
      s.insert(pos + std::string(gene).size(), ", \"into_values\": " + n);
    }
    return s;
  };
  // "fastest" repeats "faster"'s retired genes (OLD_B 2, OLD_C 1).
  const std::string repeated = [&] {
    std::string s = with_into_values("3");
    const std::string from = R"("expr": "MODE"})", to = R"x("expr": "MODE - (MODE == 3)"})x";
    s.replace(s.find(from), from.size(), to);
    const std::string from_c = R"("expr": "MODE == 2")", to_c = R"("expr": "MODE >= 2")";
    return s.replace(s.find(from_c), from_c.size(), to_c);
  }();
  const SearchSpace s = SearchSpace::from_json(repeated);
  EXPECT_EQ(s.parse("OLD_B=2,OLD_C=1").text(), "tiny:A=1,MODE=faster");
  EXPECT_EQ(s.parse("MODE=fastest").text(), "tiny:A=1,MODE=fastest");
  // An old text that names no value lists those the retired genes could name, not the later ones.
  EXPECT_EQ(error_of([&] { s.parse("OLD_B=3"); }),
            "no MODE matches the retired genes OLD_B=3,OLD_C=0 of genome 'OLD_B=3' (MODE {slow, fast, faster} "
            "replaced them)");
  std::string all_values = repeated;
  for (std::string::size_type pos; (pos = all_values.find(", \"into_values\": 3")) != std::string::npos;)
    all_values.erase(pos, std::string(", \"into_values\": 3").size());
  EXPECT_NE(error_of([&] { SearchSpace::from_json(all_values); }).find("do not tell its values faster and fastest apart"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SearchSpace::from_json(with_into_values("5")); }).find("names 5 values of MODE, which has 4"),
            std::string::npos);
  std::string mixed = with_into_values("3");
  mixed.replace(mixed.rfind("\"into_values\": 3"), std::string("\"into_values\": 3").size(), "\"into_values\": 4");
  EXPECT_NE(error_of([&] { SearchSpace::from_json(mixed); }).find("name different numbers of its values"),
            std::string::npos);
}

TEST(SearchSpaceJsonTest, LabelledGenesAndRetiredGenes) {
  const SearchSpace s = SearchSpace::from_json(kLabelledSpace);
  EXPECT_EQ(s.default_genome().text(), "tiny:A=1,MODE=fast");
  EXPECT_EQ(s.genes()[1].values, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.kernel_name(s.parse("MODE=faster"), problem("1x8x512x64")), "k<1, 2>");
  EXPECT_EQ(s.parse("OLD_B=0").text(), "tiny:A=1,MODE=slow");
  EXPECT_EQ(s.parse("tiny:A=2,OLD_B=2,OLD_C=1").text(), "tiny:A=2,MODE=faster");
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(s.at(5).text(), "tiny:A=2,MODE=faster");
  EXPECT_EQ(error_of([&] { s.parse("OLD_B=2"); }),
            "no MODE matches the retired genes OLD_B=2,OLD_C=0 of genome 'OLD_B=2' (MODE {slow, fast, faster} "
            "replaced them)");
}

TEST(SearchSpaceJsonTest, RejectsMalformedLabelsAndRetiredGenes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {labelled_with(R"("labels": ["slow", "fast", "faster"])", R"("labels": ["slow"], "values": [0])"),
       "gene MODE has both values and labels"},
      {labelled_with(R"("labels": ["slow", "fast", "faster"])", R"("labels": [])"), "genes[1].labels must be a non-empty array"},
      {labelled_with(R"(["slow", "fast", "faster"])", R"(["slow", "fast", "fast"])"), "gene MODE lists fast twice"},
      {labelled_with(R"(["slow", "fast", "faster"])", R"(["slow", "a b", "faster"])"), "label \"a b\" is not an identifier"},
      {labelled_with(R"(["slow", "fast", "faster"])", R"(["slow", 1, "faster"])"), "label 1 is not an identifier"},
      {labelled_with(R"("default": "fast")", R"("default": 1)"), "gene MODE default 1 is not one of its labels"},
      {labelled_with(R"("default": "fast")", R"("default": "quick")"), "default \"quick\" is not one of its labels"},
      {labelled_with(R"("into": "MODE"})", R"("into": "NODE"})"), "retired gene OLD_B goes into unknown gene 'NODE'"},
      {labelled_with(R"({"name": "OLD_C", "expr": "MODE == 2"})", R"({"name": "OLD_D", "expr": "MODE == 2"})"),
       "retired gene OLD_C has no derived value of its name"},
      {labelled_with(R"("expr": "MODE == 2")", R"("expr": "MODE == A")"),
       "derived value OLD_C of a retired gene reads 'A', not only MODE"},
      {labelled_with(R"([{"name": "OLD_B", "expr": "MODE"}, {"name": "OLD_C", "expr": "MODE == 2"}])",
                     R"([{"name": "OLD_B", "expr": "MODE > 0"}, {"name": "OLD_C", "expr": "0"}])"),
       "the genes retired into MODE do not tell its values fast and faster apart"},
      {labelled_with(R"("retired_genes": [)", R"("retired_genes": 3, "x": [)"), "retired_genes must be an array"},
  };
  for (const auto& [json, message] : cases) {
    std::string what = error_of([&] { SearchSpace::from_json(json); });
    EXPECT_NE(what.find(message), std::string::npos) << "expected '" << message << "', got: " << what;
    EXPECT_EQ(what.rfind("bad search space: ", 0), 0u) << what;
  }
}

}  // namespace
TEST(SearchSpaceTest, WgmmaNeedsAnSm90aTargetOnceTheTargetIsKnown) {
  const Genome g = space().parse("BLOCK_M=64,BLOCK_N=128,WARPS=4,WGMMA=1");
  const Problem p = problem("1x8x512x64");
  EXPECT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit, 80), "wgmma_needs_sm90a");
  EXPECT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit, 90), std::nullopt);
  EXPECT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit), std::nullopt) << "unknown target: not checked";
  EXPECT_EQ(space().violated_constraint(space().parse("WGMMA=0"), p, kDefaultSmemLimit, 80), std::nullopt);
  EXPECT_EQ(space().variables(g, p, 1000, 90).at("SM_ARCH"), 90);
  const Genome tma = space().parse("BLOCK_M=64,SCHEDULE=tma");
  EXPECT_EQ(space().violated_constraint(tma, p, kDefaultSmemLimit, 80), "tma_needs_sm90a");
  EXPECT_EQ(space().violated_constraint(tma, p, kDefaultSmemLimit, 90), std::nullopt);
}

// A constraint that reads SM_ARCH through a derived value is still a device constraint.
TEST(SearchSpaceTest, ArchConstraintThroughADerivedValueWaitsForTheTarget) {
  const SearchSpace s = SearchSpace::from_json(R"({
    "template": "t", "serves": {"HEAD_DIM": [64], "DTYPE": ["fp16"]},
    "genes": [{"name": "A", "values": [0, 1], "default": 1}],
    "derived": [{"name": "HOPPER", "expr": "SM_ARCH == 90"}],
    "constraints": [{"name": "a_needs_hopper", "expr": "A == 0 || HOPPER"}],
    "kernel": "k<{A}>",
    "launch": {"threads": "32", "grid_x": "1", "grid_y": "1", "grid_z": "1", "smem_bytes": "0"}
  })");
  const Genome g = s.parse("A=1");
  EXPECT_EQ(s.violated_constraint(g, problem("1x8x512x64"), 0), std::nullopt);
  EXPECT_EQ(s.violated_constraint(g, problem("1x8x512x64"), 0, 80), "a_needs_hopper");
  EXPECT_EQ(s.violated_constraint(g, problem("1x8x512x64"), 0, 90), std::nullopt);
}

TEST(SearchSpaceTest, SmArchNumberReadsCompileTargets) {
  EXPECT_EQ(sm_arch_number("sm_90a"), 90);
  EXPECT_EQ(sm_arch_number("sm_80"), 80);
  EXPECT_EQ(sm_arch_number("sm_100f"), 100);
  EXPECT_EQ(sm_arch_number("compute_90"), SearchSpace::kUnknownArch);
  EXPECT_EQ(sm_arch_number("sm_"), SearchSpace::kUnknownArch);
  EXPECT_EQ(sm_arch_number(""), SearchSpace::kUnknownArch);
}

}  // namespace evo
