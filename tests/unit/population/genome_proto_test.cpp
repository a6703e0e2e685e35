// The typed genome of the wire (evo.v1.Genome) and Genome: a round trip loses nothing, an
// enumerated gene travels as its value, and a bad message gets one clear InputError.
#include "genome_proto.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "errors.h"
#include "search_space.h"

namespace evo {
namespace {

const SearchSpace& space() { return SearchSpace::for_template("fa_s512_v3"); }

std::map<std::string, int64_t> genes_of(const v1::Genome& m) {
  std::map<std::string, int64_t> genes;
  for (const auto& gene : m.genes()) genes[gene.first] = gene.second;
  return genes;
}

// The InputError's message, or "" when m converts.
std::string error_of(const v1::Genome& m) {
  try {
    (void)genome_from_proto(m);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GenomeProto, EveryGeneTravelsAndComesBackTheSame) {
  for (uint64_t i = 0; i < space().size(); i += space().size() / 97 + 1) {
    const Genome g = space().at(i);
    const v1::Genome m = genome_to_proto(g);
    EXPECT_EQ(m.kernel(), "fa_s512_v3");
    EXPECT_EQ(m.genes_size(), static_cast<int>(space().genes().size()));
    const Genome back = genome_from_proto(m);
    EXPECT_EQ(back, g);
    EXPECT_EQ(back.text(), g.text()) << "labels come back with the space";
  }
}

TEST(GenomeProto, AnEnumeratedGeneTravelsAsItsValue) {
  const Genome g = space().parse("SCHEDULE=tma");
  const v1::Genome m = genome_to_proto(g);
  EXPECT_EQ(m.genes().at("SCHEDULE"), 3) << "sync, cp_async, cp_async_pv, tma: index 3";
  const v1::Genome from_text = genome_proto_of_text(g.text());
  EXPECT_EQ(from_text.kernel(), m.kernel());
  EXPECT_EQ(genes_of(from_text), genes_of(m));
}

TEST(GenomeProto, GenesNotNamedTakeTheirDefaults) {
  v1::Genome m;
  m.set_kernel("fa_s512_v3");
  (*m.mutable_genes())["BLOCK_N"] = 128;
  EXPECT_EQ(genome_from_proto(m), space().parse("BLOCK_N=128"));
}

TEST(GenomeProto, ABadMessageGetsOneClearError) {
  const v1::Genome good = genome_to_proto(space().default_genome());
  v1::Genome m = good;
  m.clear_kernel();
  EXPECT_EQ(error_of(m), "genome names no kernel");

  m = good;
  m.set_kernel("fa_nope");
  EXPECT_NE(error_of(m).find("unknown seed 'fa_nope' (known: fa_s512_v3"), std::string::npos) << error_of(m);

  m = good;
  (*m.mutable_genes())["BLOCK_Q"] = 32;
  EXPECT_NE(error_of(m).find("genome of fa_s512_v3: unknown gene 'BLOCK_Q' (genes: BLOCK_M,"), std::string::npos)
      << error_of(m);

  m = good;
  (*m.mutable_genes())["TMA"] = 1;  // retired: old texts name it, a message never does
  EXPECT_NE(error_of(m).find("unknown gene 'TMA'"), std::string::npos) << error_of(m);

  m = good;
  (*m.mutable_genes())["BLOCK_M"] = 48;
  EXPECT_EQ(error_of(m), "genome of fa_s512_v3: BLOCK_M=48 is outside its domain {16, 32, 64, 128}");

  m = good;
  (*m.mutable_genes())["SCHEDULE"] = 99;
  EXPECT_NE(error_of(m).find("genome of fa_s512_v3: SCHEDULE=99 is outside its domain"), std::string::npos)
      << error_of(m);
}

TEST(GenomeProto, TextWithoutAKernelIsRefused) {
  EXPECT_THROW(genome_proto_of_text("BLOCK_M=32"), InputError);
  EXPECT_THROW(genome_proto_of_text("fa_nope:BLOCK_M=32"), InputError);
}

}  // namespace
}  // namespace evo
