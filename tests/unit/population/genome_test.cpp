#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "genome.h"
#include "search_space.h"

namespace evo {
namespace {

// A second, independent FNV-1a 64 (published offset basis 0xcbf29ce484222325) so the test does
// not trust the code under test.
std::string reference_fnv1a(const std::string& s) {
  const uint64_t prime = (uint64_t{1} << 40) + 0x1b3;  // 1099511628211
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s.size(); ++i) h = (h ^ static_cast<uint8_t>(s[i])) * prime;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const char kDefaultText[] = "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0";

TEST(GenomeTest, DefaultGenomeCanonicalText) {
  Genome g = SearchSpace::for_template("fa_s512_v3").default_genome();
  EXPECT_EQ(g.text(), kDefaultText);
  EXPECT_EQ(g.genes_text(), "BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0");
}

TEST(GenomeTest, HashIsStableFnv1aOfText) {
  Genome g = SearchSpace::for_template("fa_s512_v3").default_genome();
  EXPECT_EQ(g.hash(), reference_fnv1a(kDefaultText));
  EXPECT_EQ(g.hash(), "f98df8cc57318dca");  // kDefaultText's FNV-1a, computed outside this code base
  EXPECT_EQ(g.hash().size(), 16u);
}

TEST(GenomeTest, TextRoundTripsThroughParse) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  for (uint64_t i = 0; i < space.size(); i += 7) {
    Genome g = space.at(i);
    EXPECT_EQ(space.parse(g.text()), g);
    EXPECT_EQ(space.parse(g.genes_text()), g);
    EXPECT_EQ(space.parse(g.text()).hash(), g.hash());
  }
}

TEST(GenomeTest, DifferentGenomesDifferentHashes) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  std::set<std::string> hashes;
  for (uint64_t i = 0; i < space.size(); ++i) hashes.insert(space.at(i).hash());
  EXPECT_EQ(hashes.size(), space.size());
}

TEST(GenomeTest, GetSetAndUnknownGenes) {
  Genome g("t", {{"A", 1}, {"B", 2}});
  EXPECT_EQ(g.get("B"), 2);
  g.set("B", 5);
  EXPECT_EQ(g.text(), "t:A=1,B=5");
  EXPECT_THROW(g.get("C"), std::out_of_range);
  EXPECT_THROW(g.set("C", 1), std::out_of_range);
  EXPECT_NE(g, Genome("t", {{"A", 1}, {"B", 2}}));
  EXPECT_NE(g, Genome("u", {{"A", 1}, {"B", 5}}));
  EXPECT_EQ(g, Genome("t", {{"A", 1}, {"B", 5}}));
}

// An enumerated gene prints its label; a value without one (set out of range) prints its number.
TEST(GenomeTest, LabelledGenesPrintTheirLabels) {
  auto labels = std::make_shared<const GeneLabels>(GeneLabels{{}, {"off", "on"}});
  Genome g("t", {{"A", 1}, {"B", 1}}, labels);
  EXPECT_EQ(g.text(), "t:A=1,B=on");
  g.set("B", 0);
  EXPECT_EQ(g.genes_text(), "A=1,B=off");
  g.set("B", 2);
  EXPECT_EQ(g.genes_text(), "A=1,B=2");
  EXPECT_EQ(Genome("t", {{"A", 1}, {"B", 1}}).text(), "t:A=1,B=1");  // no labels: numbers
}

// What evoctl prints for an elite: the genes unlike the default's, labels as text spells them,
// which the space reads back as the same genome.
TEST(GenomeTest, GenesUnlikeABaseReadBackAsTheSameGenome) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const Genome base = space.default_genome();
  EXPECT_EQ(base.genes_unlike(base), "");
  const Genome g = space.parse("BLOCK_N=128,SCHEDULE=tma,WARPS=8");
  EXPECT_EQ(g.genes_unlike(base), "BLOCK_N=128,WARPS=8,SCHEDULE=tma");
  EXPECT_EQ(space.parse(g.genes_unlike(base)), g);
  EXPECT_EQ(Genome("t", {{"A", 1}, {"B", 2}}).genes_unlike(Genome("t", {{"A", 1}})), "B=2");
}

}  // namespace
}  // namespace evo
