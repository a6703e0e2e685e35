#include "genome_proto.h"

#include <map>
#include <string>

#include "errors.h"
#include "search_space.h"

namespace evo {

v1::Genome genome_to_proto(const Genome& g) {
  v1::Genome m;
  m.set_kernel(g.template_id());
  auto& genes = *m.mutable_genes();
  for (const auto& [name, value] : g.genes()) genes[name] = value;
  return m;
}

Genome genome_from_proto(const v1::Genome& m) {
  if (m.kernel().empty()) throw InputError("genome names no kernel");
  const SearchSpace& space = SearchSpace::for_template(m.kernel());
  std::map<std::string, int64_t> genes;
  for (const auto& gene : m.genes()) genes[gene.first] = gene.second;
  try {
    return space.from_genes(genes);
  } catch (const InputError& e) {
    throw InputError("genome of " + m.kernel() + ": " + e.what());
  }
}

v1::Genome genome_proto_of_text(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    throw InputError("genome '" + std::string(text) + "' names no kernel (expected KERNEL:NAME=VALUE,...)");
  return genome_to_proto(SearchSpace::for_template(text.substr(0, colon)).parse(text));
}

}  // namespace evo
