#pragma once
// A candidate kernel: a template id plus one value per gene, in the search space's gene order.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace evo {

class Genome {
 public:
  Genome() = default;
  Genome(std::string template_id, std::vector<std::pair<std::string, int64_t>> genes)
      : template_id_(std::move(template_id)), genes_(std::move(genes)) {}

  const std::string& template_id() const { return template_id_; }
  const std::vector<std::pair<std::string, int64_t>>& genes() const { return genes_; }
  // Throws std::out_of_range for a gene this genome does not have.
  int64_t get(const std::string& name) const;
  void set(const std::string& name, int64_t value);

  // Canonical text: "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,..." in gene order. The identity of a genome.
  std::string text() const;
  // Just the genes: "BLOCK_M=32,BLOCK_N=64,...".
  std::string genes_text() const;
  // Stable 16-hex-digit hash of text(); the key of the result cache.
  std::string hash() const;

  friend bool operator==(const Genome& a, const Genome& b) {
    return a.template_id_ == b.template_id_ && a.genes_ == b.genes_;
  }
  friend bool operator!=(const Genome& a, const Genome& b) { return !(a == b); }

 private:
  std::string template_id_;
  std::vector<std::pair<std::string, int64_t>> genes_;
};

}  // namespace evo
