// A workload file read and planned into buckets (cli/workload.h): the served-model suite lands one
// shape to a bucket, neighbours share one, and every bad file is one line naming it.
#include "workload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"

namespace evo::cli {
namespace {

namespace fs = std::filesystem;

struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text) {
    path = fs::temp_directory_path() / ("evo-workload-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
    std::ofstream(path) << text;
  }
  ~TempFile() { fs::remove(path); }
};

const char* kLlama = R"({
  "name": "llama3-8b", "seed": "fa_s512_v3", "dtype": "bf16",
  "shapes": [
    {"shape": "1x32x2048x128:kv8:causal", "weight": 2},
    {"shape": "4x32x4096x128:kv8:causal", "weight": 1},
    {"shape": "1x32x512x4096x128:kv8:causal", "weight": 2},
    {"shape": "16x32x1x4096x128:kv8", "weight": 8},
    {"shape": "64x32x1x1024x128:kv8", "weight": 4},
    {"shape": "1x32x1x32768x128:kv8", "weight": 1}
  ]
})";

TEST(Workload, TheServedModelSuitePlansOneBucketAShapeHeaviestFirst) {
  TempFile f(kLlama);
  const Workload w = read_workload(f.path.string(), "");
  EXPECT_EQ(w.name, "llama3-8b");
  EXPECT_EQ(w.seed, "fa_s512_v3");
  EXPECT_DOUBLE_EQ(w.weight, 18);
  ASSERT_EQ(w.buckets.size(), 6u) << "no two of its shapes are within a factor of two";
  EXPECT_EQ(w.buckets[0].run_shapes(), std::vector<std::string>{"16x32x1x4096x128:kv8:bf16"});
  EXPECT_EQ(w.buckets[0].group, "heads 32/8, head dim 128, non-causal, bf16, decode");
  EXPECT_EQ(w.buckets[1].run_shapes(), std::vector<std::string>{"64x32x1x1024x128:kv8:bf16"});
  // The chunk over a cache is a group of its own, beside the prefills.
  bool chunk = false;
  for (const auto& b : w.buckets)
    chunk = chunk || b.group == "heads 32/8, head dim 128, causal, bf16, chunk";
  EXPECT_TRUE(chunk);
}

TEST(Workload, NeighboursShareABucketWhoseRunTunesOnItsThreeHeaviest) {
  TempFile f(R"({"seed": "fa_s512_v3", "shapes": [
    {"shape": "8x32x1x1024x128:kv8", "weight": 1},
    {"shape": "8x32x1x1100x128:kv8", "weight": 5},
    {"shape": "8x32x1x1300x128:kv8", "weight": 2},
    {"shape": "8x32x1x1500x128:kv8", "weight": 3},
    {"shape": "8x32x1x8192x128:kv8", "weight": 1}]})");
  const Workload w = read_workload(f.path.string(), "");
  ASSERT_EQ(w.buckets.size(), 2u);
  EXPECT_EQ(w.buckets[0].shapes.size(), 4u);
  EXPECT_DOUBLE_EQ(w.buckets[0].weight, 11);
  EXPECT_EQ(w.buckets[0].run_shapes(),
            (std::vector<std::string>{"8x32x1x1100x128:kv8", "8x32x1x1500x128:kv8", "8x32x1x1300x128:kv8"}));
  EXPECT_EQ(w.buckets[1].run_shapes(), std::vector<std::string>{"8x32x1x8192x128:kv8"});
  EXPECT_EQ(w.name, f.path.stem().string()) << "a file without a name is named by its file";
  EXPECT_EQ(max_evals_share(w, w.buckets[0], 120), 110);
  EXPECT_EQ(max_evals_share(w, w.buckets[1], 120), 10);
  EXPECT_EQ(max_evals_share(w, w.buckets[1], 5), 1) << "every bucket gets at least one";
  EXPECT_EQ(max_evals_share(w, w.buckets[1], 0), 0) << "no limit stays no limit";
}

TEST(Workload, TheFilesDefaultsApplyToShapesWithoutASuffix) {
  TempFile f(R"({"seed": "fa_s512_v3", "causal": true, "dtype": "bf16",
    "shapes": [{"shape": "1x8x512x64"}, {"shape": "1x8x4096x64:nc:fp16"}]})");
  const Workload w = read_workload(f.path.string(), "fa_s512_v3");
  ASSERT_EQ(w.buckets.size(), 2u);
  EXPECT_EQ(w.buckets[0].run_shapes(), std::vector<std::string>{"1x8x512x64:causal:bf16"});
  EXPECT_EQ(w.buckets[1].run_shapes(), std::vector<std::string>{"1x8x4096x64"});
}

// A shape's starts are read once by the seed's space; its bucket starts from those of its shapes,
// heaviest shape first, each genome once.
TEST(Workload, AShapesStartsAreTypedAndItsBucketTakesThemHeaviestFirst) {
  TempFile f(R"({"seed": "fa_s512_v3", "shapes": [
    {"shape": "8x32x1x1024x128:kv8", "weight": 1, "starts": ["BLOCK_M=16,PACK_GQA=1", "BLOCK_M=64,SPLIT_KV=4"]},
    {"shape": "8x32x1x1100x128:kv8", "weight": 5, "starts": ["PACK_GQA=1,BLOCK_M=16"]},
    {"shape": "8x32x1x8192x128:kv8", "weight": 1}]})");
  const Workload w = read_workload(f.path.string(), "");
  ASSERT_EQ(w.buckets.size(), 2u);
  ASSERT_EQ(w.buckets[0].shapes.size(), 2u);
  ASSERT_EQ(w.buckets[0].shapes[0].starts.size(), 1u) << "the heavier shape's";
  EXPECT_EQ(w.buckets[0].shapes[0].starts[0].get("BLOCK_M"), 16);
  const std::vector<Genome> starts = w.buckets[0].starts();
  ASSERT_EQ(starts.size(), 2u) << "the genome both shapes name, once";
  EXPECT_EQ(starts[0].text(), w.buckets[0].shapes[0].starts[0].text());
  EXPECT_EQ(starts[1].get("SPLIT_KV"), 4);
  EXPECT_TRUE(w.buckets[1].starts().empty());
}

TEST(Workload, EveryBadFileIsOneLineNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "is not JSON"},
      {"[]", "must be a JSON object"},
      {R"({"seed": "fa_s512_v3"})", "'shapes' must be a non-empty list"},
      {R"({"seed": "fa_s512_v3", "shapes": []})", "'shapes' must be a non-empty list"},
      {R"({"shapes": [{"shape": "1x8x512x64"}]})", "names no seed: give --seed"},
      {R"({"seed": "nope", "shapes": [{"shape": "1x8x512x64"}]})", "unknown seed 'nope'"},
      {R"({"seed": "fa_s512_v3", "shape": [], "shapes": [{"shape": "1x8x512x64"}]})", "unknown field 'shape'"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "weigth": 2}]})",
       "unknown field 'weigth' in shapes entry 1"},
      {R"({"seed": "fa_s512_v3", "shapes": ["1x8x512x64"]})", "shapes entry 1 must be an object"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512"}]})", "malformed shape '1x8x512'"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x256x64:causal"}]})", "causal needs seq_q <= seq_k"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x32x512x64:kv5"}]})", "do not divide the 32 query heads"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "weight": 0}]})", "must be a positive number"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "weight": "2"}]})", "must be a positive number"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64"}, {"shape": "1x8x512x64:nc"}]})",
       "shape '1x8x512x64' is named twice"},
      {R"({"seed": "fa_s512_v3", "dtype": "fp8", "shapes": [{"shape": "1x8x512x64"}]})", "dtype: unknown dtype 'fp8'"},
      {R"({"seed": "fa_s512_v3", "causal": 1, "shapes": [{"shape": "1x8x512x64"}]})", "causal must be true or false"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "starts": "BLOCK_M=16"}]})",
       "starts of '1x8x512x64' must be a list of genome texts"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "starts": [""]}]})",
       "starts of '1x8x512x64' must be a list of genome texts"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "starts": ["BLOCK_M=16", 3]}]})",
       "starts of '1x8x512x64' must be a list of genome texts"},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "starts": ["NOPE=1"]}]})",
       "start 'NOPE=1' of '1x8x512x64': "},
      {R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64", "starts": ["BLOCK_M=48"]}]})",
       "start 'BLOCK_M=48' of '1x8x512x64': "},
  };
  for (const auto& [text, why] : cases) {
    TempFile f(text);
    try {
      read_workload(f.path.string(), "");
      ADD_FAILURE() << "accepted " << text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("workload " + f.path.string() + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(why), std::string::npos) << text << " -> " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  TempFile f(R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64"}]})");
  EXPECT_THROW(read_workload((f.path.string() + ".missing"), ""), InputError);
  try {
    read_workload(f.path.string(), "other_seed");
    ADD_FAILURE() << "a seed the file contradicts was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("names seed 'fa_s512_v3', the command line 'other_seed'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace evo::cli
