#pragma once
// Text forms the exporter prints. They match Genome::text() and ProblemShape::text() but need
// only the headers, so the exporter links no more than the brief allows.
#include <string>

#include "genome.h"
#include "shape.h"

namespace evo::export_text {

inline std::string genome(const Genome& g) {
  std::string s = g.template_id() + ":";
  for (size_t i = 0; i < g.genes().size(); ++i)
    s += (i ? "," : "") + g.genes()[i].first + "=" + std::to_string(g.genes()[i].second);
  return s;
}

inline std::string shape(const ProblemShape& p) {
  std::string s = std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" + std::to_string(p.seq_q);
  if (p.seq_k != p.seq_q) s += "x" + std::to_string(p.seq_k);
  s += "x" + std::to_string(p.head_dim);
  return p.causal ? s + ":causal" : s;
}

}  // namespace evo::export_text
