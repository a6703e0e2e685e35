#pragma once
// A candidate kernel: a template id plus one value per gene, in the search space's gene order.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace evo {

// How a space's genes print, in gene order: an empty list for an integer gene; for an enumerated
// gene (the space JSON's "labels"), label i names value i. SearchSpace reads it from the JSON and
// hands it to every genome it makes, so that a genome's text names SCHEDULE=pingpong, not 7.
using GeneLabels = std::vector<std::vector<std::string>>;

class Genome {
 public:
  Genome() = default;
  // Genomes of a space come from the space (SearchSpace::parse, at, default_genome), which
  // passes its labels; a genome built here without them prints every value as a number.
  Genome(std::string template_id, std::vector<std::pair<std::string, int64_t>> genes,
         std::shared_ptr<const GeneLabels> labels = nullptr)
      : template_id_(std::move(template_id)), genes_(std::move(genes)), labels_(std::move(labels)) {}

  const std::string& template_id() const { return template_id_; }
  // Values as the kernel and the space's expressions see them: an enumerated gene's code.
  const std::vector<std::pair<std::string, int64_t>>& genes() const { return genes_; }
  // Throws std::out_of_range for a gene this genome does not have.
  int64_t get(const std::string& name) const;
  void set(const std::string& name, int64_t value);

  // Canonical text: "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,...,SCHEDULE=cp_async,..." in gene order,
  // an enumerated gene by its label. The identity of a genome.
  std::string text() const;
  // Just the genes: "BLOCK_M=32,BLOCK_N=64,...".
  std::string genes_text() const;
  // The genes whose values differ from base's, spelled as genes_text() spells them
  // ("BLOCK_N=256,SCHEDULE=tma"); text that the space reads back as this genome when base is the
  // default. Empty when none differ; a gene base lacks counts as differing.
  std::string genes_unlike(const Genome& base) const;
  // Stable 16-hex-digit hash of text(); the key of the result cache.
  std::string hash() const;

  friend bool operator==(const Genome& a, const Genome& b) {
    return a.template_id_ == b.template_id_ && a.genes_ == b.genes_;
  }
  friend bool operator!=(const Genome& a, const Genome& b) { return !(a == b); }

 private:
  std::string template_id_;
  std::vector<std::pair<std::string, int64_t>> genes_;
  std::shared_ptr<const GeneLabels> labels_;  // null: every gene prints as a number

  std::string item_text(size_t i) const;  // "SCHEDULE=tma"
};

}  // namespace evo
