// The compile sweep (no GPU needed), per architecture (sm_80, sm_90a) and per problem (1x8x512 at
// head_dim 64, the same causal, head_dim 128, causal bf16, and on sm_90a causal e4m3 at head dim
// 128): every genome of the fa_s512_v3 space goes
// through gate 1, and each invalid one must be rejected before any compile with its constraint
// named. The valid ones go to NVRTC (gates 2-3), which must compile every one of them:
//   CompileSample (the test command): per problem a covering sample of the valid genomes, so that
//     every value any valid genome holds for any gene is compiled at least once (every schedule,
//     every gene's extremes), and per violated constraint two invalid genomes through gate 1. A
//     few dozen compiles per arch.
//   CompileAll (label `sweep`, left out of the test command): at head_dim 64 non-causal every
//     valid genome, and every invalid one through gate 1 (thousands of compiles per arch: hours);
//     at the other problems the same as the sample.
// Both print what they cover. The sample is chosen from the space's genes, naming none, with a
// fixed seed. EVO_SWEEP_THREADS sets the compile threads (default: one per core).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attention/problem.h"
#include "covering_sample.h"
#include "device_catalog.h"
#include "kernel_compiler.h"
#include "pre_launch_gates.h"
#include "search_space.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

enum class Scope { kCoveringSample, kEveryGenome };

constexpr uint64_t kSeed = 20240607;
constexpr size_t kInvalidPerConstraint = 2;  // through gate 1, per problem, in the sample

Problem problem(int d, bool causal, DType dtype = DType::kF16) {
  attention::Shape s;
  s.batch = 1, s.heads = 8, s.seq_q = s.seq_k = 512, s.head_dim = d, s.causal = causal;
  s.dtype = dtype;
  return attention::to_problem(s);
}

// The space's own problem first: CompileAll compiles every valid genome of that one. bf16 changes
// the MMA instructions and the packing, so it gets a sample of its own; so does e4m3 (its tiles,
// its descriptors, P's fragment), on sm_90a only: no genome of another target serves it.
std::vector<Problem> problems(int sm_arch) {
  std::vector<Problem> all = {problem(64, false), problem(64, true), problem(128, false),
                              problem(64, true, DType::kBF16)};
  if (sm_arch == 90) all.push_back(problem(128, true, DType::kE4M3));
  return all;
}

int threads() {
  const char* t = std::getenv("EVO_SWEEP_THREADS");
  return t ? std::atoi(t) : 0;
}

// Gate 1's verdicts on the whole space for one problem.
struct ProblemSweep {
  Problem shape;
  std::vector<Genome> valid;
  std::map<std::string, uint64_t> invalid_by_constraint;
  std::map<std::string, std::vector<Genome>> invalid_sample;  // kInvalidPerConstraint each
};

// Walks the space once, sorting each genome into valid or invalid (by the constraint it violates)
// for every problem. `on_invalid` sees each invalid genome; a seeded reservoir keeps a few per
// constraint.
std::vector<ProblemSweep> classify(
    const SearchSpace& space, int64_t smem_limit, int sm_arch,
    const std::function<void(const Genome&, const Problem&, const std::string&)>& on_invalid) {
  std::vector<ProblemSweep> sweeps;
  for (const auto& p : problems(sm_arch)) sweeps.push_back({p, {}, {}, {}});
  std::mt19937_64 rng(kSeed);
  for (uint64_t i = 0; i < space.size(); ++i) {
    const Genome g = space.at(i);
    for (auto& s : sweeps) {
      const auto violated = space.violated_constraint(g, s.shape, smem_limit, sm_arch);
      if (!violated) {
        s.valid.push_back(g);
        continue;
      }
      const uint64_t seen = ++s.invalid_by_constraint[*violated];
      auto& kept = s.invalid_sample[*violated];
      if (kept.size() < kInvalidPerConstraint) kept.push_back(g);
      else if (const uint64_t j = rng() % seen; j < kInvalidPerConstraint) kept[j] = g;
      on_invalid(g, s.shape, *violated);
    }
  }
  return sweeps;
}

// Gate 1 must reject g, naming the constraint, without compiling anything.
void expect_rejected_before_compile(KernelCompiler& untouched, const Genome& g,
                                    const Problem& shape, int64_t smem_limit,
                                    const std::string& constraint) {
  v1::Evaluation e;
  EXPECT_FALSE(run_pre_launch_gates(untouched, g, {shape}, smem_limit, e));
  EXPECT_EQ(e.status(), v1::INVALID);
  EXPECT_NE(e.message().find("violates " + constraint), std::string::npos) << e.message();
}

// Which of a problem's valid genomes go to NVRTC, with what they cover printed.
// Each problem's sample has its own seed, so that problems with the same valid genomes (causal or
// not) compile different ones.
std::vector<Genome> genomes_to_compile(const std::string& arch, const SearchSpace& space,
                                       const ProblemSweep& s, uint64_t seed, bool every) {
  std::vector<Genome> chosen = every ? s.valid : test::covering_sample(s.valid, seed);
  const auto held = test::values_held(s.valid);
  EXPECT_EQ(test::values_held(chosen), held) << "the sample misses a value a valid genome holds";
  std::map<std::string, std::set<int64_t>> never_valid;
  for (const auto& gene : space.genes())
    for (int64_t v : gene.values)
      if (!held.count(gene.name) || !held.at(gene.name).count(v)) never_valid[gene.name].insert(v);
  std::printf("[%s] %s: %zu of %llu genomes valid, %zu go to NVRTC (%s)\n", arch.c_str(),
              s.shape.text().c_str(), s.valid.size(), static_cast<unsigned long long>(space.size()),
              chosen.size(), every ? "every valid genome" : "covering sample");
  std::printf("[%s] %s:   they cover %s\n", arch.c_str(), s.shape.text().c_str(),
              test::values_text(test::values_held(chosen), space.genes()).c_str());
  std::printf("[%s] %s:   values no valid genome holds: %s\n", arch.c_str(), s.shape.text().c_str(),
              test::values_text(never_valid, space.genes()).c_str());
  if (!every)
    for (const Genome& g : chosen)
      std::printf("[%s] %s:   %s\n", arch.c_str(), s.shape.text().c_str(), g.genes_text().c_str());
  return chosen;
}

struct CompileCounts {
  int sent = 0, compiled = 0, resource_rejected = 0, compile_errors = 0;
};

// Gates 2-3: queue every compile on the pool, then collect in order.
CompileCounts compile_all(const std::string& arch, int64_t smem_limit,
                          const std::vector<std::pair<Genome, Problem>>& jobs) {
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), arch, threads());
  for (const auto& [g, shape] : jobs) compiler.compile_candidate_async(g, shape);
  CompileCounts c;
  for (const auto& [g, shape] : jobs) {
    ++c.sent;
    v1::Evaluation e;
    const bool passed = run_pre_launch_gates(compiler, g, {shape}, smem_limit, e).has_value();
    if (passed) ++c.compiled;
    else if (e.status() == v1::RESOURCE_REJECT) ++c.resource_rejected, ++c.compiled;
    else ++c.compile_errors;
    EXPECT_NE(e.status(), v1::COMPILE_ERROR)
        << g.text() << " " << shape.text() << ": " << e.message();
    if (e.status() == v1::RESOURCE_REJECT)
      std::printf("  resource_reject %s %s: %s\n", g.genes_text().c_str(), shape.text().c_str(),
                  e.message().c_str());
  }
  return c;
}

void sweep(const std::string& arch, Scope scope) {
  if (find_template("fa_s512_v3")->source.size() < 200)
    GTEST_SKIP() << "fa_s512_v3.cuh is still a placeholder";
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const int64_t smem_limit = find_device_model(arch)->smem_per_block_optin;
  const bool every = scope == Scope::kEveryGenome;

  // Gate 1, against a compiler whose cache must stay empty: invalid means no compile. It logs
  // each rejection, and most of the space is rejected: the counts printed below say what was.
  test::TempDir invalid_dir;
  KernelCompiler untouched(invalid_dir.path(), arch, 1);
  const auto log_level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  // CompileAll checks every invalid genome of its first problem, else a sample per constraint.
  auto every_one = [&](const Problem& shape) { return every && shape == problems(sm_arch_number(arch)).front(); };
  const auto sweeps = classify(
      space, smem_limit, sm_arch_number(arch),
      [&](const Genome& g, const Problem& shape, const std::string& constraint) {
        if (every_one(shape))
          expect_rejected_before_compile(untouched, g, shape, smem_limit, constraint);
      });
  for (const auto& s : sweeps)
    if (!every_one(s.shape))
      for (const auto& [constraint, genomes] : s.invalid_sample)
        for (const Genome& g : genomes)
          expect_rejected_before_compile(untouched, g, s.shape, smem_limit, constraint);
  spdlog::set_level(log_level);
  EXPECT_TRUE(std::filesystem::is_empty(invalid_dir.path())) << "an invalid genome was compiled";

  std::vector<std::pair<Genome, Problem>> jobs;
  uint64_t seed = kSeed;
  for (const auto& s : sweeps) {
    uint64_t invalid = 0;
    for (const auto& [constraint, n] : s.invalid_by_constraint) {
      std::printf("[%s] %s:   invalid, rejected before compile: %llu violate %s\n", arch.c_str(),
                  s.shape.text().c_str(), static_cast<unsigned long long>(n), constraint.c_str());
      invalid += n;
    }
    EXPECT_EQ(s.valid.size() + invalid, space.size());
    EXPECT_FALSE(s.valid.empty()) << s.shape.text();
    for (Genome& g : genomes_to_compile(arch, space, s, seed++, every_one(s.shape)))
      jobs.emplace_back(std::move(g), s.shape);
  }

  const CompileCounts c = compile_all(arch, smem_limit, jobs);
  std::printf("[%s] sent to NVRTC %d, compiled %d (of which resource-rejected %d), compile "
              "errors %d\n",
              arch.c_str(), c.sent, c.compiled, c.resource_rejected, c.compile_errors);
  EXPECT_GT(c.sent, 0);
  EXPECT_EQ(c.compile_errors, 0);
}

TEST(CompileSample, CoveringSampleCompilesForSm80) { sweep("sm_80", Scope::kCoveringSample); }
TEST(CompileSample, CoveringSampleCompilesForSm90a) { sweep("sm_90a", Scope::kCoveringSample); }
TEST(CompileAll, EveryValidGenomeCompilesForSm80) { sweep("sm_80", Scope::kEveryGenome); }
TEST(CompileAll, EveryValidGenomeCompilesForSm90a) { sweep("sm_90a", Scope::kEveryGenome); }

}  // namespace
}  // namespace evo
