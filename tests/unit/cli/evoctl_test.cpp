// evoctl end to end against an in-process fake evod: what it prints, its exit status, its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "dispatch_file.h"
#include "evoctl.h"
#include "fake_coordinator.h"
#include "genome_proto.h"
#include "options.h"
#include "search_space.h"

namespace evo::cli {
namespace {

namespace fs = std::filesystem;

// A workload file named NAME.json in the temporary directory, removed when the test ends, also
// when an ASSERT stops it.
struct WorkloadFile {
  fs::path path;
  WorkloadFile(const std::string& name, const std::string& text)
      : path(fs::temp_directory_path() / (name + ".json")) {
    std::ofstream(path) << text;
  }
  ~WorkloadFile() { fs::remove(path); }
  std::string str() const { return path.string(); }
};

struct Result {
  int exit_status;
  std::string out, err;
};

class Evoctl : public ::testing::Test {
 protected:
  Result run(std::vector<std::string> args, bool tty = false, std::optional<std::string> token_env = {}) {
    std::ostringstream out, err;
    Environment env;
    env.token = token_env;
    env.stdout_is_tty = tty;
    env.coordinator = server_.address();
    env.connect_timeout_ms = 2000;
    const int rc = run_evoctl(args, out, err, env);
    return {rc, out.str(), err.str()};
  }
  testing::FakeCoordinatorServer server_;
};

TEST_F(Evoctl, SubmitPrintsTheRunIdAloneAndSendsTheOptions) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--shape", "2x8x512x64:causal", "--shape", "1x4x1000x64",
                      "--generations", "3", "--population", "8", "--top-k", "2", "--strategy", "random",
                      "--rng-seed", "42", "--device-class", "sm_90a/H100", "--causal", "--fitness-inputs", "resident"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "r1\n");
  const auto& req = server_.service.last_submit;
  EXPECT_EQ(req.shapes_size(), 2);
  EXPECT_EQ(req.shapes(0), "2x8x512x64:causal");
  EXPECT_EQ(req.generations(), 3);
  EXPECT_EQ(req.population(), 8);
  EXPECT_EQ(req.top_k(), 2);
  EXPECT_EQ(req.search_strategy(), v1::SEARCH_STRATEGY_RANDOM);
  EXPECT_EQ(req.strategy(), "random") << "and its label, for an evod before the enums";
  EXPECT_EQ(req.rng_seed(), 42u);
  EXPECT_EQ(req.device_class(), "sm_90a/H100");
  EXPECT_TRUE(req.causal());
  EXPECT_EQ(req.fitness_from(), v1::FITNESS_INPUTS_RESIDENT);
  EXPECT_EQ(req.fitness_inputs(), "resident");
}

// --dtype travels typed beside the shapes; a shape's own suffix, in either order, goes as typed.
TEST_F(Evoctl, SubmitSendsTheDtype) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--shape", "1x8x512x64:bf16:causal", "--dtype", "bf16"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& req = server_.service.last_submit;
  EXPECT_EQ(req.dtype(), v1::DTYPE_BF16);
  ASSERT_EQ(req.shapes_size(), 1);
  EXPECT_EQ(req.shapes(0), "1x8x512x64:bf16:causal");
  ASSERT_EQ(run({"submit", "--seed", "fa_s512_v3"}).exit_status, 0);
  EXPECT_EQ(server_.service.last_submit.dtype(), v1::DTYPE_FP16) << "fp16 unless asked";
}

TEST_F(Evoctl, SubmitSendsTheBudgets) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--budget", "1h30m", "--max-evals", "200", "--patience", "3"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& req = server_.service.last_submit;
  EXPECT_EQ(req.budget_ms(), 5'400'000);
  EXPECT_EQ(req.max_evals(), 200);
  EXPECT_EQ(req.patience(), 3);
  ASSERT_EQ(run({"submit", "--seed", "fa_s512_v3"}).exit_status, 0);
  EXPECT_EQ(server_.service.last_submit.budget_ms(), 0) << "no budget unless asked";
  EXPECT_EQ(server_.service.last_submit.target_us(), 0) << "no target unless asked";
  ASSERT_EQ(run({"submit", "--seed", "fa_s512_v3", "--target-us", "5.25"}).exit_status, 0);
  EXPECT_EQ(server_.service.last_submit.target_us(), 5.25);
}

// A workload file: one run per bucket, heaviest first, each on its own shapes with its share of
// --max-evals and the rest of the options; the run ids on stdout, the plan and the export on stderr.
TEST_F(Evoctl, SubmitWorkloadStartsARunPerBucketAndSaysTheExport) {
  const WorkloadFile file("evoctl-test-served", R"({"name": "served", "dtype": "bf16", "shapes": [
      {"shape": "16x32x1x4096x128:kv8", "weight": 3},
      {"shape": "1x32x512x4096x128:kv8:causal", "weight": 1}]})");
  const auto r = run({"submit", "--workload", file.str(), "--seed", "fa_s512_v3", "--max-evals", "40",
                      "--budget", "5m"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& submits = server_.service.submits;
  ASSERT_EQ(submits.size(), 2u);
  EXPECT_EQ(std::vector<std::string>(submits[0].shapes().begin(), submits[0].shapes().end()),
            std::vector<std::string>{"16x32x1x4096x128:kv8:bf16"});
  EXPECT_EQ(std::vector<std::string>(submits[1].shapes().begin(), submits[1].shapes().end()),
            std::vector<std::string>{"1x32x512x4096x128:kv8:causal:bf16"});
  EXPECT_EQ(submits[0].max_evals(), 30);
  EXPECT_EQ(submits[1].max_evals(), 10);
  for (const auto& s : submits) {
    EXPECT_EQ(s.seed(), "fa_s512_v3");
    EXPECT_EQ(s.budget_ms(), 300'000);
  }
  EXPECT_NE(submits[0].request_id(), submits[1].request_id()) << "a run each, not a retry";
  EXPECT_EQ(r.out, "r1\nr2\n");
  EXPECT_NE(r.err.find("workload served: 2 bucket(s), seed fa_s512_v3\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bucket 1 (heads 32/8, head dim 128, non-causal, bf16, decode, weight 75%): tunes on "
                       "16x32x1x4096x128:kv8:bf16 -> r1"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("when they are done: evoctl export r1 r2 --out served.cu\n"), std::string::npos) << r.err;
}

TEST_F(Evoctl, ABadWorkloadIsOneLineAndStartsNoRun) {
  const WorkloadFile file("evoctl-test-bad",
                          R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64"}, {"shape": "1x8x512"}]})");
  const auto r = run({"submit", "--workload", file.str()});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "evoctl: workload " + file.str() + ": malformed shape '1x8x512': expected BxHxSxD, BxHxSqxSkxD or LENSxHxD (a packed batch's lengths, '17+300/4096')\n");
  EXPECT_TRUE(server_.service.submits.empty());
  const auto with_shape = run({"submit", "--workload", file.str(), "--shape", "1x8x512x64"});
  EXPECT_EQ(with_shape.exit_status, 2);
  EXPECT_EQ(with_shape.err,
            "evoctl: submit --workload does not take --shape (the workload file names its shapes and their defaults)\n");
  const auto with_target = run({"submit", "--workload", file.str(), "--target-us", "5"});
  EXPECT_EQ(with_target.exit_status, 2);
  EXPECT_EQ(with_target.err,
            "evoctl: submit --workload does not take --target-us (each bucket's run ranks its own shapes: submit a "
            "bucket's shapes with their own target)\n");
  EXPECT_TRUE(server_.service.submits.empty());
}

// One start list serves buckets of different dtypes: a start a bucket's constraints refuse (FP8
// reads through tensor maps with wgmma) is left out of that bucket's run alone, with a line; one
// that fits no bucket is refused before any run is made.
TEST_F(Evoctl, AWorkloadsStartsGoToTheBucketsTheyFit) {
  const WorkloadFile file("evoctl-test-starts", R"({"seed": "fa_s512_v3", "shapes": [
      {"shape": "1x8x512x64:e4m3", "weight": 2}, {"shape": "1x8x512x64:fp16"}]})");
  const std::string fp16_only = "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2";
  const std::string both = "BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,WGMMA=1,SCHEDULE=tma,TMA_BOX_ROWS=256";
  const auto r = run({"submit", "--workload", file.str(), "--start", fp16_only, "--start", both});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& submits = server_.service.submits;
  ASSERT_EQ(submits.size(), 2u);
  ASSERT_EQ(submits[0].typed_start_genomes_size(), 1) << "the e4m3 bucket";
  ASSERT_EQ(submits[0].start_genomes_size(), 1);
  EXPECT_EQ(submits[0].start_genomes(0).find("fa_s512_v3:BLOCK_M=64,"), 0u) << submits[0].start_genomes(0);
  EXPECT_EQ(submits[1].typed_start_genomes_size(), 2) << "the fp16 bucket";
  EXPECT_NE(r.err.find("' left out: it violates 'e4m3_reads_through_tensor_maps' for 1x8x512x64:e4m3\n"),
            std::string::npos)
      << r.err;

  const WorkloadFile e4m3_file("evoctl-test-starts-e4m3",
                               R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64:e4m3"}]})");
  const auto refused = run({"submit", "--workload", e4m3_file.str(), "--start", fp16_only});
  EXPECT_EQ(refused.exit_status, 1);
  EXPECT_NE(refused.err.find("evoctl: INVALID_ARGUMENT: start genome 'fa_s512_v3:BLOCK_M=32,BLOCK_N=64"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("fits no bucket of workload evoctl-test-starts-e4m3: it violates "
                             "'e4m3_reads_through_tensor_maps' for 1x8x512x64:e4m3\n"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(server_.service.submits.size(), 2u) << "no run made for the refused workload";
}

// The starts a workload file names for a shape begin its bucket's run, before the command line's
// (a genome given both ways once); one that does not fit its bucket is refused before any run.
TEST_F(Evoctl, AShapesOwnStartsComeFirstInItsBucket) {
  const std::string own = "BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2";
  const std::string other = "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2";
  const WorkloadFile file("evoctl-test-own-starts", R"({"seed": "fa_s512_v3", "shapes": [
      {"shape": "1x8x512x64", "weight": 2, "starts": [")" + own + R"("]}, {"shape": "1x8x8192x64"}]})");
  const auto r = run({"submit", "--workload", file.str(), "--start", other, "--start", own});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& submits = server_.service.submits;
  ASSERT_EQ(submits.size(), 2u);
  ASSERT_EQ(submits[0].start_genomes_size(), 2) << "1x8x512x64's bucket";
  ASSERT_EQ(submits[0].typed_start_genomes_size(), 2);
  EXPECT_EQ(submits[0].start_genomes(0).find("fa_s512_v3:BLOCK_M=16,"), 0u) << submits[0].start_genomes(0);
  EXPECT_EQ(submits[0].start_genomes(1).find("fa_s512_v3:BLOCK_M=32,"), 0u) << submits[0].start_genomes(1);
  ASSERT_EQ(submits[1].start_genomes_size(), 2) << "1x8x8192x64's bucket: the command line's, in order";
  EXPECT_EQ(submits[1].start_genomes(0).find("fa_s512_v3:BLOCK_M=32,"), 0u) << submits[1].start_genomes(0);
  EXPECT_NE(r.err.find("    starts first from the 1 genome(s) the workload names for its shapes\n"), std::string::npos)
      << r.err;

  const WorkloadFile misfit("evoctl-test-own-starts-e4m3",
                            R"({"seed": "fa_s512_v3", "shapes": [{"shape": "1x8x512x64:e4m3", "starts": [")" + own +
                                R"("]}]})");
  const auto refused = run({"submit", "--workload", misfit.str()});
  EXPECT_EQ(refused.exit_status, 1);
  EXPECT_NE(refused.err.find("evoctl: INVALID_ARGUMENT: workload evoctl-test-own-starts-e4m3: start genome "
                             "'fa_s512_v3:BLOCK_M=16,"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("', named for a shape of bucket 1, violates 'e4m3_reads_through_tensor_maps' for "
                             "1x8x512x64:e4m3\n"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(server_.service.submits.size(), 2u) << "no run made for the refused workload";
}

// Every workload file the project ships submits as it stands: its shapes parse, and the starts it
// names for them fit their buckets (a stale genome there would refuse the whole file).
TEST_F(Evoctl, TheShippedWorkloadFilesSubmit) {
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(EVO_WORKLOADS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const size_t before = server_.service.submits.size();
    const auto r = run({"submit", "--workload", entry.path().string()});
    EXPECT_EQ(r.exit_status, 0) << entry.path() << ": " << r.err;
    EXPECT_GT(server_.service.submits.size(), before) << entry.path();
  }
  EXPECT_GE(files, 3u) << "llama3-8b, its packed batch and fp8 at least";
  // The Llama file's 32k decode step starts from its measured splits.
  bool split_first = false;
  for (const auto& s : server_.service.submits)
    if (s.shapes_size() == 1 && s.shapes(0) == "1x32x1x32768x128:kv8:bf16" && s.start_genomes_size() > 0)
      split_first = s.start_genomes(0).find("SPLIT_KV=16") != std::string::npos;
  EXPECT_TRUE(split_first);
}

// A bucket evod refuses stops the submits there, and the line names the runs already made.
TEST_F(Evoctl, ARefusedBucketNamesTheRunsMadeBeforeIt) {
  const WorkloadFile file("evoctl-test-refused", R"({"seed": "fa_s512_v3", "shapes": [
      {"shape": "1x8x512x64", "weight": 2}, {"shape": "1x8x4096x64"}, {"shape": "1x8x1x8192x64"}]})");
  server_.service.refuse_submit = 2;
  const auto r = run({"submit", "--workload", file.str()});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.out, "r1\n");
  EXPECT_NE(r.err.find("evoctl: INVALID_ARGUMENT: shape refused (bucket 2; runs made before it: r1)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(server_.service.submits.size(), 2u);
}

TEST(EvoctlDuration, ReadsUnitsLargestFirstAndPlainSeconds) {
  EXPECT_EQ(cli::parse_duration_ms("--budget", "90s"), 90'000);
  EXPECT_EQ(cli::parse_duration_ms("--budget", "90"), 90'000);
  EXPECT_EQ(cli::parse_duration_ms("--budget", "10m"), 600'000);
  EXPECT_EQ(cli::parse_duration_ms("--budget", "2h"), 7'200'000);
  EXPECT_EQ(cli::parse_duration_ms("--budget", "1h30m15s"), 5'415'000);
  for (const char* bad : {"", "m", "10x", "1h30", "30m1h", "1m1m", "0s", "8d", "169h", "-5m", "1.5h", "10 m"})
    EXPECT_THROW(cli::parse_duration_ms("--budget", bad), UsageError) << bad;
}

TEST_F(Evoctl, ABadDtypeIsOneUsageErrorNamingTheChoices) {
  const auto flag = run({"submit", "--seed", "fa_s512_v3", "--dtype", "fp8"});
  EXPECT_EQ(flag.exit_status, 2);
  EXPECT_EQ(flag.err, "evoctl: --dtype: unknown dtype 'fp8': expected fp16, bf16 or e4m3\n");
  const auto suffix = run({"submit", "--seed", "fa_s512_v3", "--shape", "1x8x512x64:fp8"});
  EXPECT_EQ(suffix.exit_status, 2);
  EXPECT_EQ(suffix.err, "evoctl: --shape: unknown dtype 'fp8' in shape '1x8x512x64:fp8': expected fp16, bf16 or e4m3\n");
}

// The start genomes as sent: each a message, and its canonical text for an evod before messages.
std::vector<std::pair<std::string, Genome>> sent_start_genomes(const v1::SubmitRunRequest& req) {
  std::vector<std::pair<std::string, Genome>> out;
  EXPECT_EQ(req.start_genomes_size(), req.typed_start_genomes_size());
  for (int i = 0; i < req.start_genomes_size() && i < req.typed_start_genomes_size(); ++i)
    out.emplace_back(req.start_genomes(i), genome_from_proto(req.typed_start_genomes(i)));
  return out;
}

// --start is repeatable; each is read once, here, by the seed's space and sent as a message.
TEST_F(Evoctl, SubmitStartIsReadOnceAndSentTyped) {
  const auto r = run({"submit", "--start", "BLOCK_M=64,BLOCK_N=128,WARPS=4", "--seed", "fa_s512_v3", "--start",
                      "fa_s512_v3:BLOCK_M=128,WARPS=8"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const auto sent = sent_start_genomes(server_.service.last_submit);
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& [text, genome] : sent) EXPECT_EQ(text, genome.text());
  EXPECT_EQ(sent[0].second, space.parse("BLOCK_M=64,BLOCK_N=128,WARPS=4"));
  EXPECT_EQ(sent[1].second, space.parse("BLOCK_M=128,WARPS=8"));
  ASSERT_EQ(run({"submit", "--seed", "fa_s512_v3"}).exit_status, 0);
  EXPECT_EQ(server_.service.last_submit.start_genomes_size(), 0);
  EXPECT_EQ(server_.service.last_submit.typed_start_genomes_size(), 0);
}

// An old genome text (the booleans SCHEDULE replaced) is translated once, at the edge.
TEST_F(Evoctl, SubmitStartTranslatesAnOldGenomeText) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--start",
                      "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,CP_ASYNC=1,WGMMA=1,PV_ASYNC=1,TMA=1,"
                      "STAGE_RELEASE=1,PINGPONG=1"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto sent = sent_start_genomes(server_.service.last_submit);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first,
            "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=8,STAGES=4,SCHEDULE=pingpong,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
            "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
  EXPECT_EQ(server_.service.last_submit.typed_start_genomes(0).genes().at("SCHEDULE"), 7);
}

// A --start that does not read is one line, and evod is asked nothing (not even for elites).
TEST_F(Evoctl, ABadStartIsRefusedBeforeEvodIsAsked) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--start-from", "r9", "--start", "BLOCK_M=48"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "evoctl: INVALID_ARGUMENT: start genome 'BLOCK_M=48': BLOCK_M=48 is outside its domain "
                   "{16, 32, 64, 128}\n")
      << "r9 is unknown: evod was asked first";
  EXPECT_EQ(server_.service.last_submit.seed(), "") << "nothing may be submitted";
  const auto retired = run({"submit", "--seed", "fa_s512_v3", "--start", "TMA=1,PINGPONG=1"});
  EXPECT_EQ(retired.exit_status, 1);
  EXPECT_EQ(retired.err.rfind("evoctl: INVALID_ARGUMENT: start genome 'TMA=1,PINGPONG=1': ", 0), 0u) << retired.err;
}

// --start-from asks evod for the run's elites and sends them after the --start genomes, typed: an
// evod before typed genomes sent their texts, which are read here.
TEST_F(Evoctl, SubmitStartFromSendsThatRunsElites) {
  for (bool typed : {false, true}) {
    SCOPED_TRACE(typed ? "elites as messages" : "elites as texts");
    server_.service.typed_genomes = typed;
    const auto r = run({"submit", "--seed", "fa_s512_v3", "--start-from", "r1", "--start", "BLOCK_M=128"});
    ASSERT_EQ(r.exit_status, 0) << r.err;
    const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
    const auto sent = sent_start_genomes(server_.service.last_submit);
    ASSERT_EQ(sent.size(), 3u);
    for (const auto& [text, genome] : sent) EXPECT_EQ(text, genome.text());
    EXPECT_EQ(sent[0].second, space.parse("BLOCK_M=128"));
    EXPECT_EQ(sent[1].second, space.parse("BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"));
    EXPECT_EQ(sent[2].second, space.parse("BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1"));
  }
}

// A run that does not exist, or has no elite yet, is one error and no run is submitted.
TEST_F(Evoctl, SubmitStartFromAnUnknownOrEmptyRunSubmitsNothing) {
  const auto unknown = run({"submit", "--seed", "fa_s512_v3", "--start-from", "r9"});
  EXPECT_EQ(unknown.exit_status, 1);
  EXPECT_EQ(unknown.err, "evoctl: NOT_FOUND: unknown run 'r9'\n");
  server_.service.no_elites = true;
  const auto empty = run({"submit", "--seed", "fa_s512_v3", "--start-from", "r1"});
  EXPECT_EQ(empty.exit_status, 1);
  EXPECT_EQ(empty.err, "evoctl: FAILED_PRECONDITION: run r1 has no elite to start from (yet)\n");
  EXPECT_EQ(server_.service.last_submit.seed(), "") << "nothing may be submitted";
}

TEST_F(Evoctl, SubmitHelpDescribesStart) {
  const auto r = run({"submit", "--help"});
  ASSERT_EQ(r.exit_status, 0);
  EXPECT_NE(r.out.find("[--start GENOME ...]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--start (repeatable) puts a known genome into generation 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[--start-from RUN ...]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--start-from RUN (repeatable) starts from every elite"), std::string::npos) << r.out;
}

TEST_F(Evoctl, SubmitLeavesUnsetSizesUnsetSoEvodDefaultsApply) {
  const auto r = run({"submit", "--seed", "fa_s512_v3"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& req = server_.service.last_submit;
  EXPECT_FALSE(req.has_generations());
  EXPECT_FALSE(req.has_population());
  EXPECT_FALSE(req.has_top_k());
  EXPECT_EQ(req.fitness_from(), v1::FITNESS_INPUTS_UNSPECIFIED) << "unset: evod's default";
  EXPECT_EQ(req.fitness_inputs(), "");
  EXPECT_EQ(req.search_strategy(), v1::SEARCH_STRATEGY_UNSPECIFIED);
  EXPECT_EQ(req.strategy(), "");
}

TEST_F(Evoctl, EvodRefusalIsOneLineWithItsCode) {
  const auto r = run({"submit", "--seed", "nope"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "evoctl: INVALID_ARGUMENT: unknown seed 'nope'\n");
  const auto s = run({"status", "r9"});
  EXPECT_EQ(s.exit_status, 1);
  EXPECT_EQ(s.err, "evoctl: NOT_FOUND: unknown run 'r9'\n");
}

// A server that accepts the connection but not the channel is not "not running": with --tls-ca
// against a server that does not speak TLS to it (as with a wrong CA), the line names the handshake.
TEST_F(Evoctl, FailedTlsHandshakeIsNamedNotNotRunning) {
  const fs::path ca = fs::temp_directory_path() / ("evoctl_ca_" + std::to_string(::getpid()) + ".pem");
  std::ofstream(ca) << "-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n";
  std::ostringstream out, err;
  Environment env;
  env.coordinator = server_.address();
  env.connect_timeout_ms = 1000;
  EXPECT_EQ(run_evoctl({"--tls-ca", ca.string(), "runs"}, out, err, env), 1);
  EXPECT_NE(err.str().find("evoctl: something accepts connections at " + server_.address() +
                           " but the TLS handshake failed: is --tls-ca the CA that signed evod's certificate"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(err.str().find("is it running"), std::string::npos) << err.str();
  fs::remove(ca);
}

TEST_F(Evoctl, UnreachableEvodIsNamed) {
  std::ostringstream out, err;
  Environment env;
  env.coordinator = "127.0.0.1:1";  // nothing listens on port 1
  env.connect_timeout_ms = 500;
  EXPECT_EQ(run_evoctl({"runs"}, out, err, env), 1);
  EXPECT_EQ(err.str(),
            "evoctl: nothing accepts connections at 127.0.0.1:1: is evod running, on that address? (waited 0.5 s; "
            "EVO_CONNECT_TIMEOUT_S waits longer)\n");
  // $EVO_CONNECT_TIMEOUT_S: whole seconds, or one usage line before any connection is tried.
  env.connect_timeout_s = "1";
  std::ostringstream err1;
  EXPECT_EQ(run_evoctl({"runs"}, out, err1, env), 1);
  EXPECT_NE(err1.str().find("(waited 1 s;"), std::string::npos) << err1.str();
  for (const char* bad : {"0", "abc", "601", ""}) {
    env.connect_timeout_s = bad;
    std::ostringstream e;
    EXPECT_EQ(run_evoctl({"runs"}, out, e, env), 2) << bad;
    EXPECT_EQ(e.str(), std::string("evoctl: EVO_CONNECT_TIMEOUT_S expects an integer in 1..600, got '") + bad + "'\n");
  }
}

TEST_F(Evoctl, UsageErrorsExitTwoWithOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"frobnicate"}, {"submit"}, {"status"}, {"export", "r1"}, {"export", "--out", "t.cu"}, {"export", "--python", "pkg"}, {"export", "r1", "--python"},
           {"report", "r1", "--html", "a.html", "--python", "pkg"}, {"submit", "--seed", "x", "--population", "0"},
           {"submit", "--seed", "x", "--strategy", "greedy"}, {"leaderboard", "--top", "-3"}, {"cancel", "r1", "r2"},
           {"status", "r1", "--json"}, {"runs", "--bogus"}, {"submit", "--seed"},
           {"submit", "--seed", "x", "--start"}, {"status", "r1", "--start", "BLOCK_M=64"},
           {"submit", "--seed", "x", "--start-from"}, {"leaderboard", "--start-from", "r1"},
           {"submit", "--seed", "x", "--fitness-inputs", "warm"}, {"leaderboard", "--fitness-inputs", "resident"},
           // a malformed shape is caught here, not by evod (or a connection error without it)
           {"submit", "--seed", "x", "--shape", "1x8x512"}, {"submit", "--seed", "x", "--shape", "1x8x512x64:causual"},
           {"submit", "--seed", "x", "--shape", "1x8x512x64:fp8"}, {"submit", "--seed", "x", "--dtype", "fp8"},
           {"submit", "--seed", "x", "--dtype"},
           // 0 would reach evod as "not set" and run seed 1
           {"submit", "--seed", "x", "--rng-seed", "0"},
           // evod's own limits
           {"submit", "--seed", "x", "--generations", "10001"}, {"submit", "--seed", "x", "--population", "4097"},
           {"submit", "--seed", "x", "--budget", "soon"}, {"submit", "--seed", "x", "--max-evals", "0"},
           {"submit", "--seed", "x", "--patience", "-1"}, {"status", "r1", "--budget", "1m"},
           {"submit", "--seed", "x", "--target-us", "0"}, {"submit", "--seed", "x", "--target-us", "-3"},
           {"submit", "--seed", "x", "--target-us", "nan"}, {"submit", "--seed", "x", "--target-us", "inf"},
           {"submit", "--seed", "x", "--target-us", "5us"}, {"status", "r1", "--target-us", "5"},
           // report wants a run and a file, and nothing else
           {"report", "r1"}, {"report", "--html", "r1.html"}, {"report", "r1", "--html"},
           {"report", "r1", "--html", "a.html", "--out", "b.cu"}, {"report", "r1", "r2", "--html", "a.html"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.exit_status, 2) << ::testing::PrintToString(args);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("evoctl: ", 0), 0u) << r.err;
  }
}

// export --python: runs of one architecture export as one table; the package lands in DIR.
TEST_F(Evoctl, ExportPythonWritesOneTablePerArchitecture) {
  server_.service.device_classes = {{"r1", "sm_90a/NVIDIA H200"}, {"r2", "sm_90a/NVIDIA H100"}};
  const auto dir = std::filesystem::temp_directory_path() / ("evoctl-python-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto r = run({"export", "r1", "r2", "--python", dir.string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(server_.service.exports.size(), 1u);
  const auto& req = server_.service.exports[0];
  EXPECT_EQ(std::vector<std::string>(req.run_ids().begin(), req.run_ids().end()),
            (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(req.source_name(), "kernel.cu");
  std::ifstream cu(dir / "evo_kernels/kernels/sm_100a/kernel.cu");  // the response's arch names the folder
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(cu)), {}), "// dispatch table source\n");
  std::ifstream manifest(dir / "evo_kernels/manifest.json");
  const std::string text((std::istreambuf_iterator<char>(manifest)), {});
  EXPECT_NE(text.find(R"("sm_90a/NVIDIA H100")"), std::string::npos) << text;
  EXPECT_NE(r.out.find("sm_100a: runs r1 r2 (2 buckets)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ESTIMATED: 1 of 2 winners was chosen"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pip install --no-build-isolation --no-index " + dir.string()), std::string::npos) << r.out;

  const auto again = run({"export", "r1", "--python", dir.string()});
  EXPECT_EQ(again.exit_status, 1);
  EXPECT_NE(again.err.find("the folder is not empty"), std::string::npos) << again.err;
  EXPECT_EQ(server_.service.exports.size(), 1u) << "a folder in use is refused before evod is asked";
  std::filesystem::remove_all(dir);
}

// Runs of two architectures are two exports; one refused writes nothing.
TEST_F(Evoctl, ExportPythonAsksOneExportPerArchitectureAndWritesNothingOnARefusal) {
  server_.service.device_classes = {{"r1", "sm_90a/NVIDIA H200"}, {"r2", "sm_80/NVIDIA A100"}};
  const auto dir = std::filesystem::temp_directory_path() / ("evoctl-python2-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto r = run({"export", "r1", "r2", "--python", dir.string()});
  EXPECT_EQ(r.exit_status, 1);
  ASSERT_EQ(server_.service.exports.size(), 2u);
  EXPECT_EQ(server_.service.exports[0].run_id(), "r1");
  EXPECT_EQ(server_.service.exports[1].run_id(), "r2");
  EXPECT_NE(r.err.find("NOT_FOUND: unknown run 'r2'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST_F(Evoctl, AnUnknownCommandIsToldEveryCommand) {
  const auto r = run({"frobnicate"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate' (commands: submit, status, leaderboard, candidates, runs, "
                       "workers, cancel, export, report)"),
            std::string::npos)
      << r.err;
  for (const char* cmd : {"candidates", "workers", "report"})
    EXPECT_NE(run({"--help"}).out.find(std::string("\n  ") + cmd + " "), std::string::npos) << cmd;
}

TEST_F(Evoctl, HelpEverywhereExitsZero) {
  for (const char* cmd :
       {"submit", "status", "leaderboard", "candidates", "runs", "workers", "cancel", "export", "report"}) {
    const auto r = run({cmd, "--help"});
    EXPECT_EQ(r.exit_status, 0);
    EXPECT_NE(r.out.find(std::string("usage: evoctl ") + cmd), std::string::npos) << r.out;
  }
  EXPECT_NE(run({"--help"}).out.find("commands:"), std::string::npos);
}

TEST_F(Evoctl, StatusSummarises) {
  const auto r = run({"status", "r1"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("run r1: RUNNING"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gen 3/3  evals 40/48  best 5.00 µs"), std::string::npos) << r.out;
}

TEST_F(Evoctl, WatchPrintsALinePerChangeWhenNotATerminal) {
  const auto r = run({"status", "r1", "--watch"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;  // 3 distinct states + final line
  EXPECT_NE(r.out.find("gen 1/3  evals 0/48"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run r1 DONE: best 5.00 µs"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
}

TEST_F(Evoctl, WatchDrawsABarOnATerminal) {
  const auto r = run({"status", "r1", "--watch"}, true);
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("\r\033[K[########"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ETA 0:32"), std::string::npos) << r.out;
}

TEST_F(Evoctl, WatchSaysOnceWhenTheRunHasNoWorkerLeft) {
  server_.service.watch_loses_worker = true;
  const auto r = run({"status", "r1", "--watch"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const std::string said = "stalled: it needs a worker";
  const size_t at = r.out.find(said);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(said, at + 1), std::string::npos) << "said once while it lasts:\n" << r.out;
  EXPECT_NE(r.out.find("NO WORKER\n"), std::string::npos) << r.out;
  // The line without a worker, and the one after the worker is back, are changes of their own.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
}

TEST_F(Evoctl, WatchThatEndsBeforeTheRunIsAnError) {
  server_.service.watch_ends_early = true;
  const auto r = run({"status", "r1", "--watch"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("the watch ended before run r1 finished"), std::string::npos) << r.err;
}

TEST_F(Evoctl, SubmitWatchFollowsTheNewRun) {
  const auto r = run({"submit", "--seed", "fa_s512_v3", "--watch"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("r1\n", 0), 0u);
  EXPECT_NE(r.out.find("run r1 DONE"), std::string::npos);
}

TEST_F(Evoctl, LeaderboardShowsEvidenceAndSaysEstimatedLoudly) {
  auto r = run({"leaderboard"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out.find("ESTIMATED"), std::string::npos);
  EXPECT_NE(r.out.find("default genome: 10.00 µs  BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1\n"),
            std::string::npos)
      << r.out;
  // Each elite by the genes it changes, which --start reads back as the same genome.
  EXPECT_NE(r.out.find("rank  genome (genes unlike the default's)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1     BLOCK_M=16                           5.00   6.00  "), std::string::npos)
      << "the resident figure is the geometric mean over shapes: " << r.out;
  EXPECT_NE(r.out.find("2     (the default genome)                 10.00  -  "), std::string::npos)
      << "no resident figure without one for every shape: " << r.out;
  EXPECT_NE(r.out.find("µs: the fitness, per call with inputs cycled past L2; resident µs: one input set left in L2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2.00x"), std::string::npos) << r.out;
  size_t passed = 0;
  for (size_t at = r.out.find("passed"); at != std::string::npos; at = r.out.find("passed", at + 1)) ++passed;
  EXPECT_EQ(passed, 2u) << "each elite's sanitizer verdict, one by enum, one by label: " << r.out;
  EXPECT_NE(r.out.find("#2 r1-c2 (generation 2): crossover(r1-c7, r1-c9)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("#1 r1-c1"), std::string::npos) << "no lineage line for a seed: " << r.out;
  EXPECT_NE(r.out.find("  1.5%  "), std::string::npos) << "the two measurements' spread: " << r.out;
  server_.service.estimated = true;
  r = run({"leaderboard", "r1"});
  EXPECT_EQ(r.out.rfind("!!! ESTIMATED (model evaluator, no GPU)", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  1.5%  "), std::string::npos) << "an estimate is confirmed by a second one too: " << r.out;
  EXPECT_EQ(run({"leaderboard", "r9"}).err, "evoctl: NOT_FOUND: unknown run 'r9'\n");
}

// Genomes sent as messages alone are printed through the space, as their texts would have been.
TEST_F(Evoctl, LeaderboardPrintsGenomesSentAsMessages) {
  server_.service.typed_genomes = true;
  const auto r = run({"leaderboard"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("default genome: 10.00 µs  BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,"
                       "SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank  genome (genes unlike the default's)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1     BLOCK_M=16                           5.00 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2     (the default genome)                 10.00 "), std::string::npos) << r.out;
}

// An evod that names no default genome: every elite's genes in full.
TEST_F(Evoctl, LeaderboardWithoutASeedGenomePrintsWholeGenomes) {
  server_.service.seed_genome.clear();
  const auto r = run({"leaderboard"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("default genome: 10.00 µs\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank  genome  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BLOCK_M=16,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1  5.00   6.00  "), std::string::npos)
      << r.out;
}

TEST_F(Evoctl, LeaderboardJsonIsEvodsAnswer) {
  const auto r = run({"leaderboard", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"seedUs\": 10"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"speedupVsSeed\": 2"), std::string::npos) << r.out;
}

TEST_F(Evoctl, RunsAndCancel) {
  auto r = run({"runs"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("r1   fa_s512_v3  1x8x512x64  DONE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("estimated  fitness inputs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no         rotated"), std::string::npos) << "a run that names none ranks as before: " << r.out;
  r = run({"cancel", "r1"});
  EXPECT_EQ(r.out, "run r1: CANCELLED\n");
  EXPECT_EQ(run({"cancel", "r7"}).exit_status, 1);
  server_.service.cancel_finds_it_done = true;
  r = run({"cancel", "r1"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "run r1: DONE (it had ended: nothing to cancel)\n");
}

TEST_F(Evoctl, CandidatesSaysWhichGateRefusedEachAndWhy) {
  auto r = run({"candidates", "r1"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("run r1  fa_s512_v3  1x8x512x64  RUNNING  3 of 3 candidates\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("r1-c0000   0    done    OK               10.00  -        -"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("r1-c0001   0    done    RESOURCE_REJECT  -      compile  register spills 16 bytes stored / 20 "
                       "bytes loaded > limit...  BLOCK_M=128\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("r1-c0002   0    queued  -"), std::string::npos) << r.out;
  EXPECT_EQ(server_.service.last_candidates.limit(), 0) << "evod's default";
  r = run({"candidates", "r1", "--failed", "--limit", "5"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_TRUE(server_.service.last_candidates.failed_only());
  EXPECT_EQ(server_.service.last_candidates.limit(), 5);
  EXPECT_EQ(r.out.find("r1-c0000"), std::string::npos) << r.out;
  r = run({"candidates", "r1", "--json"});
  EXPECT_NE(r.out.find("\"status\": \"RESOURCE_REJECT\""), std::string::npos) << r.out;
  EXPECT_EQ(run({"candidates"}).exit_status, 2);
  EXPECT_EQ(run({"candidates", "r1", "--limit", "0"}).exit_status, 2);
  EXPECT_EQ(run({"candidates", "r1", "--limit", "1001"}).exit_status, 2);
  r = run({"candidates", "r7"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("NOT_FOUND: unknown run 'r7'"), std::string::npos) << r.err;
}

TEST_F(Evoctl, WorkersListsTheLiveOnesAndTheGoneOnesWhenAsked) {
  auto r = run({"workers"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("worker  name           enrolment  device class        backend  state  last seen  leases  "
                       "peers agreed/not\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("w-1     gpu-host:gpu0  gpu-host   sm_90a/NVIDIA H200  cuda     live   4 s ago    2       0/0\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("w-0"), std::string::npos) << r.out;
  r = run({"workers", "--all"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("w-0     gpu-host:gpu0  -          sm_90a/NVIDIA H200  cuda     gone   3 h ago    0       0/0\n"),
            std::string::npos)
      << r.out;
  r = run({"workers", "--json"});
  EXPECT_NE(r.out.find("\"activeLeases\": 2"), std::string::npos) << r.out;
  r = run({"workers", "w-1"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("workers: unexpected argument 'w-1'"), std::string::npos) << r.err;
  EXPECT_EQ(run({"workers", "--top", "3"}).exit_status, 2);
}

TEST_F(Evoctl, TokenTravelsFromAFileOrTheEnvironment) {
  const std::string token = "s3cret-token-0123456789";
  server_.service.required_token = token;
  auto r = run({"runs"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err,
            "evoctl: UNAUTHENTICATED: missing or wrong token (give evod's token: --token-file FILE or $EVO_TOKEN)\n");
  r = run({"runs"}, false, token);
  EXPECT_EQ(r.exit_status, 0) << r.err;
  const fs::path file = fs::temp_directory_path() / ("evoctl_token_" + std::to_string(::getpid()));
  std::ofstream(file) << token << "\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  r = run({"--token-file", file.string(), "runs"}, false, std::string("wrong-token-but-file-wins"));
  EXPECT_EQ(r.exit_status, 0) << r.err;
  fs::remove(file);
  r = run({"--token-file", file.string(), "runs"});
  EXPECT_EQ(r.exit_status, 2) << "an unreadable token file is bad input";
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(Evoctl, ExportWritesTheKernelAndTheReportBesideIt) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_export_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"export", "r1", "--out", (dir / "best.cu").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  std::ifstream cu(dir / "best.cu"), md(dir / "best.report.md");
  std::string cu_text((std::istreambuf_iterator<char>(cu)), {}), md_text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_EQ(cu_text, "// kernel source\n");
  // evod's report, and the run's page (as evoctl report draws it) linked under "## Search".
  EXPECT_EQ(md_text.rfind("# report\nA winner the model evaluator chose reads ESTIMATED.\n\n## Search\n", 0), 0u)
      << md_text;
  EXPECT_NE(md_text.find("- [r1](best.r1.html): (run r1, 3 of 3 candidates, 2 elites)\n"), std::string::npos) << md_text;
  std::ifstream page(dir / "best.r1.html");
  const std::string page_text((std::istreambuf_iterator<char>(page)), {});
  EXPECT_NE(page_text.find("<svg id=\"by-evaluation\""), std::string::npos) << page_text;
  EXPECT_NE(r.out.find("wrote " + (dir / "best.r1.html").string() + " (run r1, 3 of 3 candidates, 2 elites)\n"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir / "best.dispatch.json"));
  // The build line's target is the response's arch; the report's words do not make it estimated.
  EXPECT_NE(r.out.find("build: nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_89 -o libbest.so " + (dir / "best.cu").string() +
                       "\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("ESTIMATED"), std::string::npos) << r.out;
  const auto bad = run({"export", "r1", "--out", (dir / "no_such_dir" / "best.cu").string()});
  EXPECT_EQ(bad.exit_status, 1);
  EXPECT_NE(bad.err.find("evoctl: cannot write"), std::string::npos) << bad.err;
  EXPECT_EQ(server_.service.last_export.run_id(), "r1") << "one run goes as run_id, which every evod knows";
  EXPECT_EQ(server_.service.last_export.run_ids_size(), 0);
  fs::remove_all(dir);
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), {}};
}

// The names in `dir`, to see that nothing but the page (no temporary file) is left there.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One page from the run's status, all its elites and as many candidates as evod lists.
TEST_F(Evoctl, ReportWritesThePageFromEvodsAnswers) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_report_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path html = dir / "run.html";
  const auto r = run({"report", "r1", "--html", html.string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + html.string() + " (run r1, 3 of 3 candidates, 2 elites)\n");
  EXPECT_EQ(server_.service.last_candidates.limit(), 1000) << "as many as evod lists";
  EXPECT_FALSE(server_.service.last_candidates.failed_only());
  const std::string page = read_text(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u) << page;
  EXPECT_NE(page.find("<svg id=\"by-evaluation\""), std::string::npos) << page;
  EXPECT_NE(page.find("<svg id=\"by-time\""), std::string::npos) << "the fake sends finish times";
  EXPECT_NE(page.find("data-candidate=\"r1-c0002\""), std::string::npos) << page;
  EXPECT_NE(page.find("<td>BLOCK_M=16</td>"), std::string::npos) << "the first elite's gene unlike the default";
  EXPECT_EQ(page.find("ESTIMATED"), std::string::npos);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"run.html"}) << "no temporary file left";

  // A new page replaces the file whole: one who had the old one open still reads the old one.
  server_.service.estimated = true;
  std::ifstream reader(html);
  const auto estimated = run({"report", "r1", "--html", html.string()});
  ASSERT_EQ(estimated.exit_status, 0) << estimated.err;
  EXPECT_NE(estimated.out.find(" ESTIMATED\n"), std::string::npos) << estimated.out;
  EXPECT_NE(read_text(html).find("<p class=\"estimated\">ESTIMATED"), std::string::npos);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(reader), {}), page) << "not rewritten in place";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"run.html"});
  fs::remove_all(dir);
}

// A run evod refuses is one line and exit 1; the file is not written, nor one there replaced.
TEST_F(Evoctl, ReportOfAnUnknownRunWritesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_report_unknown_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"report", "r7", "--html", (dir / "new.html").string()});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "evoctl: NOT_FOUND: unknown run 'r7'\n");
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(dir / "new.html"));
  std::ofstream(dir / "old.html") << "the page before";
  EXPECT_EQ(run({"report", "r7", "--html", (dir / "old.html").string()}).exit_status, 1);
  EXPECT_EQ(read_text(dir / "old.html"), "the page before");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"old.html"});
  fs::remove_all(dir);
}

TEST_F(Evoctl, ReportIntoAFolderThatIsNotThereIsOneLine) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_report_nodir_" + std::to_string(::getpid()));
  const auto r = run({"report", "r1", "--html", (dir / "run.html").string()});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "evoctl: cannot write " + (dir / "run.html").string() + ": No such file or directory\n");
  EXPECT_FALSE(fs::exists(dir));
}

// The printed build line is pasted into a shell: a file name with shell syntax stays one word.
TEST_F(Evoctl, ExportBuildLineQuotesTheFileNameForTheShell) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_quote_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"export", "r1", "--out", (dir / "x;rm -rf $HOME.cu").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "x;rm -rf $HOME.cu"));
  EXPECT_NE(r.out.find("build: nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_89 -o 'libx;rm -rf $HOME.so' '" +
                       (dir / "x;rm -rf $HOME.cu").string() + "'\n"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

// Whether the winner was estimated is its bucket's field, whatever the report's text says.
TEST_F(Evoctl, ExportOfAnEstimatedWinnerSaysSoFromTheBucket) {
  server_.service.estimated = true;  // and the fake's report then never writes the word
  const fs::path dir = fs::temp_directory_path() / ("evoctl_estimated_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"export", "r1", "--out", (dir / "best.cu").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.out.find("ESTIMATED: this winner was chosen by the model evaluator, not measured on a GPU\n"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

// An evod from before buckets and ExportResponse.arch: no dispatch file, and the build line defers
// to the report, the one place such an evod names the target.
TEST_F(Evoctl, ExportFromAnOlderEvodDefersTheBuildLineToTheReport) {
  server_.service.export_predates_buckets = true;
  const fs::path dir = fs::temp_directory_path() / ("evoctl_old_export_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"export", "r1", "--out", (dir / "best.cu").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "best.dispatch.json")) << "an evod that sends no buckets gets no dispatch file";
  EXPECT_NE(r.out.find("build: as " + (dir / "best.report.md").string() + " says\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("-arch="), std::string::npos) << "no target is guessed: " << r.out;
  fs::remove_all(dir);
}

TEST_F(Evoctl, ExportOfSeveralRunsWritesTheTableItsReportAndTheBenchDispatchFile) {
  const fs::path dir = fs::temp_directory_path() / ("evoctl_table_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = run({"export", "r1", "r2", "--out", (dir / "table.cu").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto& req = server_.service.last_export;
  EXPECT_TRUE(req.run_id().empty()) << "several runs go as run_ids only: an old evod refuses them";
  ASSERT_EQ(req.run_ids_size(), 2);
  EXPECT_EQ(req.run_ids(0), "r1");
  EXPECT_EQ(req.run_ids(1), "r2");
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  };
  EXPECT_EQ(slurp(dir / "table.cu"), "// dispatch table source\n");
  // evoctl tells evod the file's name, and the report written beside table.cu names table.cu.
  EXPECT_EQ(req.source_name(), "table.cu");
  // r1's page is linked; evod knows no r2 to draw (a line says so), and the export is written anyway.
  EXPECT_EQ(slurp(dir / "table.report.md"),
            "# table report\nBuild: `nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_100a -o libtable.so table.cu`\n"
            "\n## Search\n\nEach run's convergence (best time against evaluations and against wall time, every "
            "candidate coloured by the gate that stopped it), its elites' genes and its gate failures, as `evoctl "
            "report` draws them:\n\n- [r1](table.r1.html): (run r1, 3 of 3 candidates, 2 elites)\n");
  EXPECT_TRUE(fs::exists(dir / "table.r1.html"));
  EXPECT_FALSE(fs::exists(dir / "table.r2.html"));
  EXPECT_NE(r.out.find("no page for run r2: NOT_FOUND: unknown run 'r2'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-arch=sm_100a -o libtable.so " + (dir / "table.cu").string() + "\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ESTIMATED: 1 of 2 winners was chosen by the model evaluator"), std::string::npos) << r.out;
  const std::string json = slurp(dir / "table.dispatch.json");
  // The format bench/bench_dispatch.py reads; every entry names the exported .cu beside it.
  EXPECT_NE(json.find(R"("shape": "1x8x512x64")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("shape": "4x16x2048x64")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("shape": "1x8x512x1024x64")"), std::string::npos) << "unequal lengths are benched: " << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), 5) << "four entries: " << json;
  EXPECT_EQ(r.out.find("not in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bucket r2: fa_s512_v3:BLOCK_M=64 serves 2 shape(s) (ESTIMATED)"), std::string::npos) << r.out;
  const auto missing = run({"export", "r1", "r7", "--out", (dir / "other.cu").string()});
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_EQ(missing.err, "evoctl: NOT_FOUND: unknown run 'r7'\n");
  EXPECT_FALSE(fs::exists(dir / "other.cu")) << "a refused export writes nothing";
  fs::remove_all(dir);
}

TEST(DispatchFile, EntriesPerShapeWithCausalityDtypeGenomeAndTheCu) {
  v1::ExportResponse r;
  auto* b = r.add_buckets();
  b->set_run_id("run-0001");
  b->set_genome("fa_s512_v3:BLOCK_M=16");
  b->add_shapes("2x8x512x64:causal");
  b->add_shapes("2x8x512x512x64:bf16");  // seq_q == seq_k spelled long: benchable as 2x8x512x64
  const DispatchFile f = dispatch_file(r, "table.cu");
  EXPECT_EQ(f.json,
            "{\n  \"shapes\": [\n"
            "    {\n      \"causal\": true,\n      \"cu\": \"table.cu\",\n      \"dtype\": \"fp16\",\n"
            "      \"estimated\": false,\n"
            "      \"genome\": \"fa_s512_v3:BLOCK_M=16\",\n      \"run_id\": \"run-0001\",\n"
            "      \"shape\": \"2x8x512x64\"\n    },\n"
            "    {\n      \"causal\": false,\n      \"cu\": \"table.cu\",\n      \"dtype\": \"bf16\",\n"
            "      \"estimated\": false,\n"
            "      \"genome\": \"fa_s512_v3:BLOCK_M=16\",\n      \"run_id\": \"run-0001\",\n"
            "      \"shape\": \"2x8x512x64\"\n    }\n  ]\n}\n");
  EXPECT_TRUE(f.skipped.empty());
  for (const char* bad : {"2x8x512", "2x8x512x64:causa", "2xAx512x64", "2x8x512x64x64x1", "2x8x512x64:fp8"}) {
    v1::ExportResponse worse = r;
    worse.mutable_buckets(0)->add_shapes(bad);
    EXPECT_THROW(dispatch_file(worse, "table.cu"), std::invalid_argument) << bad;
  }
  v1::ExportResponse unknown = r;
  unknown.mutable_buckets(0)->set_genome("no_such_kernel:BLOCK_M=16");
  EXPECT_THROW(dispatch_file(unknown, "table.cu"), std::invalid_argument) << "a kernel this evoctl lacks";
  EXPECT_EQ(dispatch_path("out/table.cu"), "out/table.dispatch.json");
  EXPECT_EQ(dispatch_path("table"), "table.dispatch.json");
}

}  // namespace
}  // namespace evo::cli
