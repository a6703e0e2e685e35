#pragma once
// evo::Problem: what one call of a kernel family's kernels computes (for attention, one
// [batch, heads, seq, head_dim] problem, causal or not, in one dtype), as code outside the family
// holds it: the family and the values of its problem variables, in the family's order. The
// variables are the names a search space's expressions read (attention: BATCH, HEADS,
// HEADS_KV, SEQ_Q, SEQ_K, HEAD_DIM, CAUSAL, DTYPE, VARLEN). Only the family's own code (kernel_templates/<family>/) reads
// them as typed fields; everyone else passes a Problem whole, prints it, and hands its variables
// to the search space.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

struct KernelFamily;

// Values of some of a family's problem variables, by name: those a kernel serves (its space's
// "serves", SearchSpace::served()). A problem is served when each listed variable's value is one
// of its list's.
using ServedValues = std::map<std::string, std::vector<int64_t>, std::less<>>;

class Problem {
 public:
  // No family and no values: only to be assigned (a default member, a resized vector).
  Problem() = default;
  // Throws std::invalid_argument unless `values` has one value per variable of the family.
  // `extents`: what a problem holds beyond its variables' values, as the family defines it
  // (attention: a packed batch's sequence lengths); empty for most problems. Its variables still
  // say what the search space reads (attention: the batch, the longest sequence, VARLEN).
  Problem(const KernelFamily& family, std::vector<int64_t> values, std::vector<int64_t> extents = {});

  // Throws std::logic_error for a default-constructed Problem.
  const KernelFamily& family() const;
  bool empty() const { return family_ == nullptr; }
  // In the order of the family's problem_variables().
  const std::vector<int64_t>& values() const { return values_; }
  const std::vector<int64_t>& extents() const { return extents_; }
  // Throws std::out_of_range for a name that is not one of the family's variables.
  int64_t value(std::string_view name) const;
  // name -> value, as a search space's expressions read them.
  std::map<std::string, int64_t> variables() const;

  // The family's canonical text ("1x8x512x64:causal"): what the store keeps and people read.
  std::string text() const;
  // Floating-point operations of one call.
  double flops() const;
  // Bytes one call must move between the device's memory and the chip at the least (every input
  // read and every output written once).
  double bytes_moved() const;

  friend bool operator==(const Problem& a, const Problem& b) {
    return a.family_ == b.family_ && a.values_ == b.values_ && a.extents_ == b.extents_;
  }
  friend bool operator!=(const Problem& a, const Problem& b) { return !(a == b); }

 private:
  const KernelFamily* family_ = nullptr;
  std::vector<int64_t> values_;
  std::vector<int64_t> extents_;
};

}  // namespace evo
