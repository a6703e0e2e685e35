// The CI sweep (no GPU needed), per architecture: every genome of the fa_s512_v3 space goes
// through gate 1 at head_dim 64 non-causal, and each invalid one must be rejected before any compile
// with its constraint named. The valid ones compile with NVRTC: all of them with EVO_SWEEP_ALL=1
// (about 13,000 per arch, a few CPU-hours each), otherwise, to stay within CI's time, every corner
// genome (each gene at an end of its domain) plus a seeded random sample, and a seeded sample of
// causal and head_dim 128 genomes. Prints the counts. EVO_SWEEP_THREADS sets the compile threads.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "device_catalog.h"
#include "kernel_compiler.h"
#include "pre_launch_gates.h"
#include "search_space.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

struct Counts {
  int valid = 0, compiled = 0, resource_rejected = 0, compile_errors = 0;
  std::map<std::string, int> invalid_by_constraint;
};

ProblemShape problem(int d, bool causal) {
  ProblemShape s;
  s.batch = 1, s.heads = 8, s.seq_q = s.seq_k = 512, s.head_dim = d, s.causal = causal;
  return s;
}

bool sweep_all() {
  const char* v = std::getenv("EVO_SWEEP_ALL");
  return v && std::string(v) == "1";
}
constexpr size_t kSampledValid = 160;  // besides the corners, per arch
constexpr int kSampledOtherProblems = 12;  // per kind (causal, head_dim 128)

// Every gene at the first or last value of its domain.
bool is_corner(const SearchSpace& space, const Genome& g) {
  for (const auto& gene : space.genes()) {
    const int64_t v = g.get(gene.name);
    if (v != gene.values.front() && v != gene.values.back()) return false;
  }
  return true;
}

int threads() {
  const char* t = std::getenv("EVO_SWEEP_THREADS");
  return t ? std::atoi(t) : 0;
}

void sweep(const std::string& arch) {
  if (find_template("fa_s512_v3")->source.size() < 200)
    GTEST_SKIP() << "fa_s512_v3.cuh is still a placeholder";
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const int64_t smem_limit = find_device_model(arch)->smem_per_block_optin;
  test::TempDir invalid_dir, dir;

  // Which genome at which problem: all of them at d64 non-causal, a seeded sample of the others.
  std::vector<std::pair<Genome, ProblemShape>> jobs;
  for (uint64_t i = 0; i < space.size(); ++i) jobs.emplace_back(space.at(i), problem(64, false));
  std::mt19937_64 rng(20240607);
  std::uniform_int_distribution<uint64_t> pick(0, space.size() - 1);
  for (int i = 0; i < kSampledOtherProblems; ++i) jobs.emplace_back(space.at(pick(rng)), problem(64, true));
  for (int i = 0; i < kSampledOtherProblems; ++i) jobs.emplace_back(space.at(pick(rng)), problem(128, false));

  // Gate 1 first, against a compiler whose cache must stay empty: invalid means no compile.
  Counts c;
  std::vector<std::pair<Genome, ProblemShape>> valid;
  {
    KernelCompiler untouched(invalid_dir.path(), arch, 1);
    // Gate 1 logs each rejection, and nearly all of the space's four million genomes are rejected:
    // half a gigabyte of test output per arch. The counts printed below say what was rejected.
    const auto log_level = spdlog::get_level();
    spdlog::set_level(spdlog::level::warn);
    for (const auto& [g, shape] : jobs) {
      const auto violated = space.violated_constraint(g, shape, smem_limit, sm_arch_number(arch));
      if (!violated) {
        valid.emplace_back(g, shape);
        continue;
      }
      ++c.invalid_by_constraint[*violated];
      v1::Evaluation e;
      EXPECT_FALSE(run_pre_launch_gates(untouched, g, {shape}, smem_limit, e));
      EXPECT_EQ(e.status(), v1::INVALID);
      EXPECT_NE(e.message().find("violates " + *violated), std::string::npos) << e.message();
    }
    spdlog::set_level(log_level);
    EXPECT_TRUE(std::filesystem::is_empty(invalid_dir.path())) << "an invalid genome was compiled";
  }
  const size_t all_valid = valid.size();
  if (!sweep_all()) {
    // Keep the corners and the other problems; a seeded sample of the remaining d64 genomes.
    std::vector<std::pair<Genome, ProblemShape>> kept, rest;
    for (auto& job : valid) {
      const bool plain = job.second == problem(64, false);
      (!plain || is_corner(space, job.first) ? kept : rest).push_back(std::move(job));
    }
    std::shuffle(rest.begin(), rest.end(), rng);
    rest.resize(std::min(rest.size(), kSampledValid));
    kept.insert(kept.end(), rest.begin(), rest.end());
    valid = std::move(kept);
  }
  std::printf("[%s] mode %s: %zu of %zu valid genome/problem pairs go to NVRTC\n", arch.c_str(),
              sweep_all() ? "all (EVO_SWEEP_ALL=1)" : "corners + seeded sample", valid.size(), all_valid);

  // Gates 2-3 for the valid ones: queue every compile on the pool, then collect in order.
  KernelCompiler compiler(dir.path(), arch, threads());
  for (const auto& [g, shape] : valid) compiler.compile_candidate_async(g, shape);
  for (const auto& [g, shape] : valid) {
    ++c.valid;
    v1::Evaluation e;
    const bool passed = run_pre_launch_gates(compiler, g, {shape}, smem_limit, e).has_value();
    if (passed) ++c.compiled;
    else if (e.status() == v1::RESOURCE_REJECT) ++c.resource_rejected, ++c.compiled;
    else ++c.compile_errors;
    EXPECT_NE(e.status(), v1::COMPILE_ERROR) << g.text() << " " << shape.text() << ": " << e.message();
    if (e.status() == v1::RESOURCE_REJECT)
      std::printf("  resource_reject %s %s: %s\n", g.genes_text().c_str(), shape.text().c_str(),
                  e.message().c_str());
  }

  std::printf("[%s] %zu genome/problem pairs: valid %zu, sent to NVRTC %d, compiled %d (of which "
              "resource-rejected %d), compile errors %d\n",
              arch.c_str(), jobs.size(), all_valid, c.valid, c.compiled, c.resource_rejected,
              c.compile_errors);
  int invalid = 0;
  for (const auto& [name, n] : c.invalid_by_constraint) {
    std::printf("[%s]   invalid, rejected before compile: %d violate %s\n", arch.c_str(), n, name.c_str());
    invalid += n;
  }
  EXPECT_EQ(static_cast<int>(all_valid) + invalid, static_cast<int>(jobs.size()));
  EXPECT_GT(c.valid, 0);
  EXPECT_EQ(c.compile_errors, 0);
}

TEST(CompileAll, EveryValidGenomeCompilesForSm80) { sweep("sm_80"); }
TEST(CompileAll, EveryValidGenomeCompilesForSm90a) { sweep("sm_90a"); }

}  // namespace
}  // namespace evo
