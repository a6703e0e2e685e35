#pragma once
// The genome text the exporter prints. It matches Genome::text() but needs only the header.
// Shapes print as ProblemShape::text().
#include <string>

#include "genome.h"

namespace evo::export_text {

inline std::string genome(const Genome& g) {
  std::string s = g.template_id() + ":";
  for (size_t i = 0; i < g.genes().size(); ++i)
    s += (i ? "," : "") + g.genes()[i].first + "=" + std::to_string(g.genes()[i].second);
  return s;
}

}  // namespace evo::export_text
