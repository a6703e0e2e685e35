// The space's SMEM_BYTES launch formula against the kernel's own need (KernelTraits::kSmemBytes):
// the worker and the export launch with the formula's bytes, and a kernel given fewer traps at
// its first instruction, so the two must agree for every genome. NVRTC checks it without a GPU:
// one program of static_asserts, one per genome, over a seeded sample of the valid genomes of
// both head dims, causal and not (all ~6700 take NVRTC three minutes; the sample, a few seconds).
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "attention/problem.h"
#include "device_limits.h"
#include "kernel_compiler.h"
#include "search_space.h"
#include "template_registry.h"
#include "test_support.h"

namespace evo {
namespace {

constexpr int kSampledPerHeadDim = 200;

Problem problem(int head_dim, bool causal) {
  attention::Shape s;
  s.batch = 1, s.heads = 8, s.seq_q = s.seq_k = 512, s.head_dim = head_dim, s.causal = causal;
  return attention::to_problem(s);
}

// static_asserts that each valid genome's traits need exactly what the formula launches with.
std::string smem_checks(const SearchSpace& space, int* count) {
  const std::string kernel_prefix = "evo::fa_s512_v3_kernel<";
  std::ostringstream checks;
  *count = 0;
  std::mt19937_64 rng(20261126);
  std::uniform_int_distribution<uint64_t> pick(0, space.size() - 1);
  for (int64_t head_dim : space.served().at("HEAD_DIM"))
    for (int sampled = 0; sampled < kSampledPerHeadDim;) {
      const Genome g = space.at(pick(rng));
      // Causal half the time: CAUSAL_FOLD's second Q tile exists in causal calls only.
      const Problem p = problem(head_dim, sampled % 2 == 1);
      if (space.violated_constraint(g, p, kDefaultSmemLimit, 90)) continue;
      ++sampled;
      const std::string name = space.kernel_name(g, p);
      EXPECT_EQ(name.rfind(kernel_prefix, 0), 0u) << name;
      // The kernel's template arguments are its traits' arguments, in the same order.
      const std::string traits = "evo::fa::KernelTraits<" + name.substr(kernel_prefix.size());
      checks << "static_assert(" << traits << "::kSmemBytes == " << space.launch(g, p).smem_bytes
             << ", \"" << g.genes_text() << " " << p.text() << "\");\n";
      ++*count;
    }
  return checks.str();
}

TEST(LaunchSmem, TheSpaceLaunchesEveryGenomeWithTheBytesItsKernelNeeds) {
  const KernelTemplate* t = find_template("fa_s512_v3");
  ASSERT_NE(t, nullptr);
  int count = 0;
  const std::string checks = smem_checks(SearchSpace::for_template("fa_s512_v3"), &count);
  ASSERT_EQ(count, 2 * kSampledPerHeadDim);
  const std::string source = std::string(t->source) + "\n" + checks +
                             "extern \"C\" __global__ void launch_smem_checked() {}\n";
  test::TempDir dir;
  KernelCompiler compiler(dir.path(), "sm_90a", 1);
  try {
    compiler.compile("launch_smem_checks", source, "launch_smem_checked");
  } catch (const CompileError& e) {
    FAIL() << "the space's SMEM_BYTES differs from KernelTraits::kSmemBytes:\n" << e.log().substr(0, 4000);
  }
  std::printf("%d genome / head dim pairs checked\n", count);
}

}  // namespace
}  // namespace evo
