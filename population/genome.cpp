#include "genome.h"

#include <algorithm>
#include <stdexcept>

#include "template_registry.h"

namespace evo {

int64_t Genome::get(const std::string& name) const {
  for (const auto& [n, v] : genes_)
    if (n == name) return v;
  throw std::out_of_range("genome " + text() + " has no gene '" + name + "'");
}

void Genome::set(const std::string& name, int64_t value) {
  for (auto& [n, v] : genes_)
    if (n == name) {
      v = value;
      return;
    }
  throw std::out_of_range("genome " + text() + " has no gene '" + name + "'");
}

std::string Genome::item_text(size_t i) const {
  const auto& [n, v] = genes_[i];
  const std::vector<std::string>* labels = labels_ && i < labels_->size() ? &(*labels_)[i] : nullptr;
  const bool labelled = labels && v >= 0 && static_cast<size_t>(v) < labels->size();
  return n + "=" + (labelled ? (*labels)[static_cast<size_t>(v)] : std::to_string(v));
}

std::string Genome::genes_text() const {
  std::string t;
  for (size_t i = 0; i < genes_.size(); ++i) t += (i ? "," : "") + item_text(i);
  return t;
}

std::string Genome::genes_unlike(const Genome& base) const {
  std::string t;
  for (size_t i = 0; i < genes_.size(); ++i) {
    const auto& [n, v] = genes_[i];
    const auto same = std::find_if(base.genes_.begin(), base.genes_.end(),
                                   [&](const auto& gene) { return gene.first == n && gene.second == v; });
    if (same == base.genes_.end()) t += (t.empty() ? "" : ",") + item_text(i);
  }
  return t;
}

std::string Genome::text() const { return template_id_ + ":" + genes_text(); }

std::string Genome::hash() const { return fnv1a_hex(text()); }

}  // namespace evo
