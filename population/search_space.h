#pragma once
// A template's search space, read from its .space.json (kernel_templates/): genes and their
// domains, derived values, named validity constraints, the kernel's name expression and launch
// formulas. Expressions are integer arithmetic over genes, derived values, the problem (BATCH,
// HEADS, HEADS_KV, SEQ_Q, SEQ_K, HEAD_DIM, CAUSAL, DTYPE: 0 fp16, 1 bf16, VARLEN) and the device (SMEM_LIMIT, and
// SM_ARCH: 90 for an sm_90a target, 0 while unknown): + - * / %, comparisons, && || !,
// parentheses, min(a,b), max(a,b). A space may list "retired_genes": genes of older genome texts,
// each replaced by a gene whose values the derived value of the retired gene's name maps back
// (parse()).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "expression.h"
#include "genome.h"
#include "family.h"
#include "problem.h"

namespace evo {

struct Gene {
  std::string name;
  // The domain. An enumerated gene (the JSON's "labels") has values 0..n-1, value i named labels[i];
  // expressions and the kernel's template argument see the value, genome text the label.
  std::vector<int64_t> values;
  std::vector<std::string> labels;  // empty for an integer gene
  int64_t default_value = 0;
  std::string doc;
  // An expression over the problem (BATCH, HEADS, HEADS_KV, SEQ_Q, SEQ_K, HEAD_DIM, CAUSAL, DTYPE, VARLEN) that is nonzero
  // where the gene changes the kernel; empty: always. Where it is zero for every shape of a run,
  // every value of the gene runs the same code, and the run keeps only the default (canonical()).
  std::string used_when;

  // How genome text spells `value`: its label, or the number.
  std::string value_text(int64_t value) const;
};

struct LaunchConfig {
  int64_t grid_x = 1, grid_y = 1, grid_z = 1;
  int64_t threads = 0;
  int64_t smem_bytes = 0;
  // Zero-initialised device scratch the kernel needs (split-KV partials); 0 for none. The caller
  // allocates and zeroes it once and passes it in the kernel's params (the family's runtime).
  int64_t workspace_bytes = 0;
  // The leading bytes of that buffer the launch needs zero (split-KV: its counters); the rest it
  // writes before it reads. A buffer made for one launch alone (a CUDA graph's) zeroes only these.
  int64_t workspace_zeroed_bytes = 0;
  // Nonzero: the kernel moves tiles through TMA, and the caller encodes CUtensorMaps of its
  // streamed inputs with boxes of this many rows, and of the rest with boxes of
  // tensor_map_q_box_rows, into the kernel's params before each launch (the family's tensor
  // maps). 0: no tensor maps.
  int64_t tensor_map_box_rows = 0;
  // The launch formula of that name, or the same rows as K and V where the space has none.
  int64_t tensor_map_q_box_rows = 0;
  // Registers per thread the compiled kernel must hold at launch, 0 for any. A block's warpgroups
  // that trade registers (setmaxnreg) draw on what the launch gave the block: a kernel compiled to
  // fewer would wait forever for registers that are not there, so the compile gate refuses it.
  int64_t min_registers = 0;
  // Nonzero: the kernel is persistent. Its blocks share the grid_x * grid_y work tiles between
  // them, so the caller launches (min(grid_x * grid_y, what the device runs at once), 1, grid_z)
  // blocks (CUTLASS's persistent tile schedulers size their grid from the device alike).
  int64_t persistent = 0;
};

// A named formula of a space: a derived value, a constraint or a launch formula.
struct Formula {
  std::string name;
  Expression expr;
};

class SearchSpace {
 public:
  // The space of a registered template; throws InputError("unknown seed 'x' (known: fa_s512_v3)").
  static const SearchSpace& for_template(std::string_view template_id);
  // Parses a .space.json text of a kernel of `family`, whose problem variables its expressions
  // read; throws InputError on malformed JSON or expressions. Without a family: the first
  // registered one's (attention), for spaces written in tests.
  static SearchSpace from_json(std::string_view json, const KernelFamily& family);
  static SearchSpace from_json(std::string_view json);

  const std::string& id() const { return id_; }
  // The family of the kernel: its problems are what the space's expressions read.
  const KernelFamily& family() const { return *family_; }
  const std::vector<Gene>& genes() const { return genes_; }
  // The values of the family's served variables the kernel is written for: the space's "serves"
  // (attention: {"HEAD_DIM": [64, 128], "DTYPE": [0, 1]}, DTYPE by value).
  const ServedValues& served() const { return served_; }
  // Throws InputError when the kernel does not serve the problem (unserved(), family.h):
  // "shape '1x8x512x64:bf16': dtype bf16 is not served by fa_s512_v3 (it serves fp16)". `text` is
  // the shape as the user gave it.
  void require_serves(const Problem& p, std::string_view text) const;
  Genome default_genome() const;

  // Accepts "fa_s512_v3:BLOCK_M=32,..." or just "BLOCK_M=32,..."; genes not named take their
  // default; an enumerated gene is named by its label (SCHEDULE=tma). Retired genes translate
  // into the gene that replaced them, those not named taking their old defaults. Throws
  // InputError for a malformed text, an unknown gene, a value outside its domain, a template
  // prefix that is not this space's, retired genes that no value of their replacement matches,
  // or a text that names both.
  Genome parse(std::string_view text) const;
  // A genome from gene values, as a typed message carries them (genome_proto.h): an enumerated
  // gene by its value, genes not named at their defaults. Throws InputError for an unknown gene
  // (retired genes too: only text translates those) or a value outside its gene's domain.
  Genome from_genes(const std::map<std::string, int64_t>& genes) const;

  // g with every gene that no shape of `shapes` uses (Gene::used_when) set to its default, so
  // that a run never holds two genomes that run the same code for its shapes. Empty `shapes`:
  // every gene counts as used.
  Genome canonical(const Genome& g, const std::vector<Problem>& shapes) const {
    return at_defaults(g, unused_genes(shapes));
  }
  // The indices of the genes no shape of `shapes` uses. They depend on the shapes alone, so a
  // caller that canonicalises many genomes of one run (a strategy) finds them once.
  std::vector<size_t> unused_genes(const std::vector<Problem>& shapes) const;
  // g with the genes at `indices` set to their defaults; a genome of another space unchanged.
  Genome at_defaults(const Genome& g, const std::vector<size_t>& indices) const;

  // SM_ARCH when the target is not known yet (evod proposes genomes before a worker has them).
  static constexpr int kUnknownArch = 0;

  // The first violated constraint's name ("kv_split_keeps_mma_k"), or nullopt if valid for this
  // problem on a device with smem_limit bytes of shared memory per block and compile target
  // sm_arch (sm_arch_number). Constraints that read SM_ARCH are skipped while it is unknown; the
  // worker checks them again against its own target before compiling.
  std::optional<std::string> violated_constraint(const Genome& g, const Problem& p,
                                                 int64_t smem_limit, int sm_arch = kUnknownArch) const;
  // Value of every gene, derived value and problem variable, for name expressions and reports.
  std::map<std::string, int64_t> variables(const Genome& g, const Problem& p,
                                           int64_t smem_limit, int sm_arch = kUnknownArch) const;
  LaunchConfig launch(const Genome& g, const Problem& p) const;
  // "evo::fa_s512_v3_kernel<0, 0, 64, 32, 64, 4, 2, 1, 1, 1, 0, 64, 0, 0, 0, 0, 0>": enumerated genes by value
  std::string kernel_name(const Genome& g, const Problem& p) const;
  // Floating-point operations one launch performs, from the space's "flops" expression (which may
  // depend on the genome, e.g. for a kernel that skips masked blocks); Problem::flops() where
  // the space gives none. For TFLOP/s figures.
  double flops(const Genome& g, const Problem& p) const;
  // The constraints' names in the order they are checked.
  std::vector<std::string> constraint_names() const;

  // The space's formulas as read, for a back end that emits them (the exporter): derived values
  // in evaluation order, constraints in checking order, the launch formulas the space gives
  // (threads, grid_x, grid_y, grid_z, smem_bytes, then those of workspace_bytes,
  // tensor_map_box_rows and tensor_map_q_box_rows it has), and the kernel name's pattern.
  std::vector<Formula> derived() const;
  std::vector<Formula> constraints() const;
  std::vector<Formula> launch_formulas() const;
  const std::string& kernel_pattern() const;

  // Number of genomes in the cartesian product of the domains, and the i-th of them
  // (mixed radix, first gene slowest) for exhaustive search and sampling.
  uint64_t size() const;
  Genome at(uint64_t index) const;

 private:
  struct Impl;
  // Throws InputError for a genome of another space (another template, or other genes).
  void require_fits(const Genome& g) const;
  void translate_retired(Genome& genome, const std::map<std::string, int64_t>& retired,
                         const std::set<std::string>& given, const std::string& whole) const;
  std::string id_;
  const KernelFamily* family_ = nullptr;
  std::vector<Gene> genes_;
  ServedValues served_;
  std::shared_ptr<const Impl> impl_;  // parsed expressions
};

// The number of a compile target: "sm_90a" -> 90, "sm_80" -> 80; kUnknownArch for anything else.
int sm_arch_number(std::string_view arch);

}  // namespace evo
