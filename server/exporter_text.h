#pragma once
// The shape's text form as the exporter prints it; it matches ProblemShape::text().
#include <string>

#include "shape.h"

namespace evo::export_text {

inline std::string shape(const ProblemShape& p) {
  std::string s = std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" + std::to_string(p.seq_q);
  if (p.seq_k != p.seq_q) s += "x" + std::to_string(p.seq_k);
  s += "x" + std::to_string(p.head_dim);
  return p.causal ? s + ":causal" : s;
}

}  // namespace evo::export_text
