// fa_s512_v3's SCHEDULE gene against the six boolean genes it replaced (CP_ASYNC, PV_ASYNC, TMA,
// STAGE_RELEASE, PINGPONG, QK_AHEAD). The space as it was before SCHEDULE is test data
// (data/fa_s512_v3.before_schedule.space.json); its genome texts translate once, in parse().
#include <algorithm>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "attention/problem.h"
#include "device_limits.h"
#include "errors.h"
#include "search_space.h"

namespace evo {
namespace {

// An attention problem as core code holds it, from its text.
Problem problem(std::string_view text) { return attention::to_problem(attention::parse_shape(text)); }

const SearchSpace& space() { return SearchSpace::for_template("fa_s512_v3"); }

const SearchSpace& old_space() {
  static const SearchSpace s = [] {
    std::ifstream in(EVO_POPULATION_TEST_DATA_DIR "/fa_s512_v3.before_schedule.space.json");
    std::stringstream text;
    text << in.rdbuf();
    return SearchSpace::from_json(text.str());
  }();
  return s;
}

std::string error_of(const std::string& genome) {
  try {
    space().parse(genome);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string schedule_of(const std::string& genome) {
  const Genome g = space().parse(genome);
  return space().genes()[4].value_text(g.get("SCHEDULE"));
}

TEST(ScheduleGeneTest, GenesAndDefault) {
  std::vector<std::string> names;
  for (const auto& g : space().genes()) names.push_back(g.name);
  EXPECT_EQ(names, (std::vector<std::string>{"BLOCK_M", "BLOCK_N", "WARPS", "STAGES", "SCHEDULE", "SWIZZLE",
                                             "SPLIT_KV", "WGMMA", "TMA_BOX_ROWS", "LAZY_RESCALE", "CAUSAL_FOLD",
                                             "PACK_GQA", "LONGEST_FIRST"}));
  const Gene& schedule = space().genes()[4];
  EXPECT_EQ(schedule.labels,
            (std::vector<std::string>{"sync", "cp_async", "cp_async_pv", "tma", "tma_pv", "tma_release",
                                      "tma_release_pv", "pingpong", "qk_ahead", "qk_ahead_release",
                                      "warp_specialized", "warp_specialized_pingpong",
                                      "warp_specialized_persistent", "warp_specialized_pingpong_persistent"}));
  EXPECT_EQ(schedule.values, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(schedule.default_value, 1);
  EXPECT_EQ(space().default_genome().text(),
            "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,"
            "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
}

// Text names the label; expressions, the kernel name and genes() see the code.
TEST(ScheduleGeneTest, LabelInTextCodeInExpressions) {
  const Genome g = space().parse("BLOCK_M=128,WARPS=8,STAGES=3,WGMMA=1,SCHEDULE=pingpong");
  EXPECT_EQ(g.get("SCHEDULE"), 7);
  EXPECT_NE(g.text().find(",SCHEDULE=pingpong,"), std::string::npos) << g.text();
  EXPECT_EQ(space().parse(g.text()), g);
  const Problem p = problem("1x8x512x64");
  EXPECT_EQ(space().kernel_name(g, p), "evo::fa_s512_v3_kernel<0, 0, 64, 128, 64, 8, 3, 7, 1, 1, 1, 64, 0, 0, 0, 0, 0>");
  const auto vars = space().variables(g, p, kDefaultSmemLimit, 90);
  EXPECT_EQ(vars.at("SCHEDULE"), 7);
  EXPECT_EQ(vars.at("DTYPE"), 0);
  for (const char* flag : {"CP_ASYNC", "TMA", "PV_ASYNC", "STAGE_RELEASE", "PINGPONG"}) EXPECT_EQ(vars.at(flag), 1) << flag;
  EXPECT_EQ(vars.at("QK_AHEAD"), 0);
  EXPECT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit, 90), std::nullopt);
}

// The warp-specialized schedules run older mainloops (tma_pv's, pingpong's) behind a producer
// warpgroup: the block has 128 threads more, and old texts never mean them. The persistent ones
// are the same blocks taking work tile after work tile.
TEST(ScheduleGeneTest, WarpSpecializedSchedulesAddAProducerWarpgroup) {
  const Problem p = problem("2x16x4096x128");
  struct Case {
    const char* schedule;
    int pingpong, persistent;
  };
  for (const auto& [schedule, pingpong, persistent] :
       {Case{"warp_specialized", 0, 0}, Case{"warp_specialized_pingpong", 1, 0},
        Case{"warp_specialized_persistent", 0, 1}, Case{"warp_specialized_pingpong_persistent", 1, 1}}) {
    const Genome g = space().parse(std::string("BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=") + schedule);
    const auto vars = space().variables(g, p, kDefaultSmemLimit, 90);
    for (const char* flag : {"CP_ASYNC", "TMA", "PV_ASYNC", "PRODUCER"}) EXPECT_EQ(vars.at(flag), 1) << schedule << " " << flag;
    EXPECT_EQ(vars.at("PINGPONG"), pingpong) << schedule;
    EXPECT_EQ(vars.at("PERSISTENT"), persistent) << schedule;
    EXPECT_EQ(space().launch(g, p).persistent, persistent) << schedule;
    EXPECT_EQ(vars.at("STAGE_RELEASE"), 0) << schedule;
    EXPECT_EQ(vars.at("QK_AHEAD"), 0) << schedule;
    EXPECT_EQ(space().launch(g, p).threads, 8 * 32 + 128) << schedule;
    EXPECT_EQ(space().violated_constraint(g, p, kDefaultSmemLimit, 90), std::nullopt) << schedule;
  }
  const Genome plain = space().parse("BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=2,WGMMA=1,SCHEDULE=pingpong");
  EXPECT_EQ(space().launch(plain, p).threads, 8 * 32);
  EXPECT_EQ(space().variables(plain, p, kDefaultSmemLimit, 90).at("PERSISTENT"), 0);
  EXPECT_EQ(space().violated_constraint(
                space().parse("BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=warp_specialized,SPLIT_KV=2"), p,
                kDefaultSmemLimit, 90),
            "warp_specialized_one_or_two_warpgroups");
  EXPECT_EQ(schedule_of("TMA=1,PV_ASYNC=1"), "tma_pv");
  EXPECT_EQ(schedule_of("TMA=1,STAGE_RELEASE=1,PV_ASYNC=1,PINGPONG=1"), "pingpong");
}

TEST(ScheduleGeneTest, BadLabelListsTheLabels) {
  const std::string domain =
      "{sync, cp_async, cp_async_pv, tma, tma_pv, tma_release, tma_release_pv, pingpong, qk_ahead, qk_ahead_release, "
      "warp_specialized, warp_specialized_pingpong, warp_specialized_persistent, "
      "warp_specialized_pingpong_persistent}";
  EXPECT_EQ(error_of("SCHEDULE=ping_pong"), "SCHEDULE=ping_pong is outside its domain " + domain);
  EXPECT_EQ(error_of("SCHEDULE=7"), "SCHEDULE=7 is outside its domain " + domain);  // labels only
  EXPECT_EQ(error_of("SCHEDULE=Pingpong"), "SCHEDULE=Pingpong is outside its domain " + domain);
}

// Every combination of the six old genes that named a kernel, with and without the template
// prefix; genes an old text omits take their old defaults (CP_ASYNC=1, the rest 0).
TEST(ScheduleGeneTest, OldGenomeTextsTranslate) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"CP_ASYNC=0", "sync"},
      {"STAGES=1,CP_ASYNC=0,PV_ASYNC=0,TMA=0,STAGE_RELEASE=0,PINGPONG=0,QK_AHEAD=0", "sync"},
      {"CP_ASYNC=1", "cp_async"},
      {"SWIZZLE=1", "cp_async"},
      {"PV_ASYNC=1", "cp_async_pv"},
      {"CP_ASYNC=1,PV_ASYNC=1", "cp_async_pv"},
      {"TMA=1", "tma"},
      {"TMA=1,PV_ASYNC=1", "tma_pv"},
      {"TMA=1,STAGE_RELEASE=1", "tma_release"},
      {"TMA=1,STAGE_RELEASE=1,PV_ASYNC=1", "tma_release_pv"},
      {"TMA=1,STAGE_RELEASE=1,PV_ASYNC=1,PINGPONG=1", "pingpong"},
      {"TMA=1,PV_ASYNC=1,QK_AHEAD=1", "qk_ahead"},
      {"TMA=1,PV_ASYNC=1,QK_AHEAD=1,STAGE_RELEASE=1", "qk_ahead_release"},
  };
  for (const auto& [genes, schedule] : cases) {
    EXPECT_EQ(schedule_of(genes), schedule) << genes;
    EXPECT_EQ(schedule_of("fa_s512_v3:" + genes), schedule) << genes;
  }
  // The rest of the genome is kept as it was.
  const Genome g = space().parse(
      "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,CP_ASYNC=1,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,PV_ASYNC=1,"
      "TMA=1,STAGE_RELEASE=0,PINGPONG=0,TMA_BOX_ROWS=64,QK_AHEAD=1,LAZY_RESCALE=0,CAUSAL_FOLD=0");
  EXPECT_EQ(g.text(),
            "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,SCHEDULE=qk_ahead,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
            "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
}

TEST(ScheduleGeneTest, OldCombinationsWithoutAScheduleAreOneError) {
  EXPECT_EQ(error_of("fa_s512_v3:BLOCK_M=64,CP_ASYNC=0,TMA=1"),
            "no SCHEDULE matches the retired genes CP_ASYNC=0,PV_ASYNC=0,TMA=1,STAGE_RELEASE=0,PINGPONG=0,QK_AHEAD=0 "
            "of genome 'fa_s512_v3:BLOCK_M=64,CP_ASYNC=0,TMA=1' (SCHEDULE {sync, cp_async, cp_async_pv, tma, tma_pv, "
            "tma_release, tma_release_pv, pingpong, qk_ahead, qk_ahead_release} replaced them)");
  for (const char* bad : {"STAGE_RELEASE=1", "PINGPONG=1", "QK_AHEAD=1", "TMA=1,QK_AHEAD=1",
                          "TMA=1,PINGPONG=1,PV_ASYNC=1", "TMA=1,STAGE_RELEASE=1,PV_ASYNC=1,PINGPONG=1,QK_AHEAD=1",
                          "CP_ASYNC=0,PV_ASYNC=1", "TMA=2", "CP_ASYNC=x"})
    EXPECT_NE(error_of(bad).find(std::string(bad) == "CP_ASYNC=x" ? "malformed genome" : "no SCHEDULE matches"),
              std::string::npos)
        << bad << ": " << error_of(bad);
}

TEST(ScheduleGeneTest, MixingOldGenesWithScheduleIsAnError) {
  EXPECT_EQ(error_of("SCHEDULE=tma,TMA=1"),
            "genome 'SCHEDULE=tma,TMA=1' mixes SCHEDULE with the genes it replaced (CP_ASYNC, PV_ASYNC, TMA, "
            "STAGE_RELEASE, PINGPONG, QK_AHEAD); give SCHEDULE alone");
  EXPECT_NE(error_of("CP_ASYNC=1,SCHEDULE=cp_async").find("mixes SCHEDULE"), std::string::npos);
  EXPECT_EQ(error_of("TMA=1,TMA=1"), "gene 'TMA' is given twice in genome 'TMA=1,TMA=1'");
  // Unknown genes are told the current genes only.
  EXPECT_EQ(error_of("FOO=1"),
            "unknown gene 'FOO' (genes: BLOCK_M, BLOCK_N, WARPS, STAGES, SCHEDULE, SWIZZLE, SPLIT_KV, WGMMA, "
            "TMA_BOX_ROWS, LAZY_RESCALE, CAUSAL_FOLD, PACK_GQA, LONGEST_FIRST)");
}

// bench/suite_starts.txt still names the old genes: every line reads as a genome of the new space.
TEST(ScheduleGeneTest, SuiteStartsStillParse) {
  std::ifstream in(EVO_BENCH_DIR "/suite_starts.txt");
  ASSERT_TRUE(in) << EVO_BENCH_DIR "/suite_starts.txt";
  int genomes = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string shape, genome;
    fields >> shape >> genome;
    EXPECT_NO_THROW(problem(shape)) << line;
    EXPECT_NO_THROW(space().parse(genome)) << line;
    ++genomes;
  }
  EXPECT_GT(genomes, 10);
}

const char* const kShapes[] = {"1x8x512x64", "1x8x512x64:causal", "2x4x1000x128", "2x4x1000x128:causal"};

bool valid(const SearchSpace& s, const Genome& g, const Problem& p, int arch) {
  return !s.violated_constraint(g, p, kDefaultSmemLimit, arch);
}

// The old genome a new one came from: SCHEDULE spelled as the six genes it replaced (their
// derived values).
Genome back_translated(const Genome& g) {
  const auto vars = space().variables(g, problem("1x8x512x64"), kDefaultSmemLimit);
  std::string text;
  for (const auto& gene : old_space().genes()) text += (text.empty() ? "" : ",") + gene.name + "=" + std::to_string(vars.at(gene.name));
  return old_space().parse(text);
}

// Whether g was expressible before the schedule gene: genes added since (PACK_GQA) at their
// defaults, every gene both spaces have at a value the old one listed (SPLIT_KV = 16 came later),
// and SCHEDULE at one of the values the six genes named (not the warp-specialized ones, which came
// later: their space.json "into_values").
bool has_old_twin(const Genome& g) {
  if (g.get("SCHEDULE") >= 10) return false;
  for (const auto& gene : space().genes()) {
    const auto old = std::find_if(old_space().genes().begin(), old_space().genes().end(),
                                  [&](const auto& o) { return o.name == gene.name; });
    const int64_t v = g.get(gene.name);
    if (old == old_space().genes().end()) {
      if (gene.name != "SCHEDULE" && v != gene.default_value) return false;
    } else if (std::find(old->values.begin(), old->values.end(), v) == old->values.end()) {
      return false;
    }
  }
  return true;
}

// Whatever reads a genome's variables (the launch, shared memory, the model evaluator's estimate)
// sees the same numbers for an old genome and its translation: every old gene and derived value
// keeps its value, as a derived value where it was a gene.
void expect_same_variables(const Genome& old, const Genome& now, const Problem& p, int arch) {
  const auto before = old_space().variables(old, p, kDefaultSmemLimit, arch);
  const auto after = space().variables(now, p, kDefaultSmemLimit, arch);
  for (const auto& [name, value] : before) {
    auto it = after.find(name);
    ASSERT_NE(it, after.end()) << name;
    EXPECT_EQ(it->second, value) << name << " of " << old.text();
  }
  EXPECT_EQ(space().launch(now, p).smem_bytes, old_space().launch(old, p).smem_bytes) << old.text();
  EXPECT_EQ(space().launch(now, p).tensor_map_box_rows, old_space().launch(old, p).tensor_map_box_rows);
}

// Every `old_stride`-th genome of the old space and every `new_stride`-th of the new, for each
// problem: an old genome no schedule matches was invalid; the others, and every new genome's old
// twin, are valid in one space exactly when their translation is in the other. With both strides
// 1 this is the whole claim: the new valid set is the image of the old one (one to one).
void check_translation_keeps_validity(uint64_t old_stride, uint64_t new_stride) {
  for (const char* shape : kShapes) {
    const Problem p = problem(shape);
    for (int arch : {80, 90}) {
      size_t old_valid = 0, new_valid = 0;
      for (uint64_t i = 0; i < old_space().size(); i += old_stride) {
        const Genome old = old_space().at(i);
        const bool ok = valid(old_space(), old, p, arch);
        old_valid += ok;
        Genome now;
        try {
          now = space().parse(old.text());
        } catch (const InputError& e) {
          EXPECT_FALSE(ok) << old.text() << " " << shape << " sm_" << arch << ": " << e.what();
          continue;
        }
        EXPECT_EQ(ok, valid(space(), now, p, arch)) << old.text() << " " << shape << " sm_" << arch;
        if (ok) expect_same_variables(old, now, p, arch);
      }
      for (uint64_t i = 0; i < space().size(); i += new_stride) {
        const Genome g = space().at(i);
        if (!has_old_twin(g)) continue;
        const Genome old = back_translated(g);
        EXPECT_EQ(space().parse(old.text()), g);
        const bool ok = valid(space(), g, p, arch);
        new_valid += ok;
        EXPECT_EQ(ok, valid(old_space(), old, p, arch)) << g.text() << " " << shape << " sm_" << arch;
      }
      EXPECT_GT(old_valid, 0u) << shape << " sm_" << arch;
      EXPECT_GT(new_valid, 0u) << shape << " sm_" << arch;
    }
  }
}

TEST(ScheduleGeneTest, TranslationKeepsValiditySampled) { check_translation_keeps_validity(509, 61); }

// Every genome of both spaces (about 35 million checks): labelled slow (tests/unit/population).
TEST(ScheduleGeneSweep, ValidGenomesAreTheImageOfTheOldValidGenomes) { check_translation_keeps_validity(1, 1); }

}  // namespace
}  // namespace evo
