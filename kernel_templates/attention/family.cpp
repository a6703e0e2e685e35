// The attention family: the KernelFamily that template_registry.cpp's line names. Its texts are
// the embedded files of this folder; its problem is attention::Shape (problem.h), whose variables
// are, in this order, the names the search spaces' expressions read.
#include "attention/export_entry.h"
#include "attention/model_estimate.h"
#include "attention/problem.h"
#include "embedded_texts.h"
#include "errors.h"

namespace evo::attention {
namespace {

const std::vector<std::string>& variables() {
  // DTYPE: the DType's value (0 fp16, 1 bf16); CAUSAL: 0 or 1; VARLEN: 1 for a packed batch
  // (BATCH sequences, SEQ_Q and SEQ_K the longest). to_problem and shape_of follow this order.
  static const std::vector<std::string> names = {"BATCH", "HEADS", "HEADS_KV", "SEQ_Q", "SEQ_K",
                                                 "HEAD_DIM", "CAUSAL", "DTYPE", "VARLEN"};
  return names;
}

Problem parse(std::string_view text, const ProblemDefaults& defaults) {
  bool causal = false;
  DType dtype = DType::kF16;
  for (const auto& [name, value] : defaults) {
    if (name == "CAUSAL") {
      causal = value != 0;
    } else if (name == "DTYPE") {
      // The DType's value, which evo.v1.DType numbers alike; an unknown one is refused there.
      dtype = dtype_from_proto(static_cast<v1::DType>(value));
    } else {
      throw InputError("shape '" + std::string(text) + "': the attention problem takes no default for " + name);
    }
  }
  return to_problem(parse_shape(text, causal, dtype));
}

std::string text(const Problem& p) { return shape_of(p).text(); }
double flops(const Problem& p) { return shape_of(p).flops(); }
double bytes_moved(const Problem& p) { return shape_of(p).bytes_moved(); }
void require_tunable(const Problem& p, std::string_view as_given) {
  require_servable_causal(shape_of(p), as_given);
}

std::string group_of(const Problem& p) { return workload_group(shape_of(p)); }
double distance(const Problem& a, const Problem& b) { return shape_distance(shape_of(a), shape_of(b)); }

ProblemDefaults submit_defaults(const v1::SubmitRunRequest& r) {
  return {{"CAUSAL", r.causal() ? 1 : 0}, {"DTYPE", static_cast<int64_t>(dtype_from_proto(r.dtype()))}};
}

v1::Problem to_proto(const Problem& p) {
  v1::Problem m;
  *m.mutable_attention() = shape_to_proto(shape_of(p));
  return m;
}

Problem from_proto(const v1::Problem& m) { return to_problem(shape_from_proto(m.attention())); }

// A kernel is written for some head dims and some dtypes; every other variable is the call's.
const std::vector<std::string>& served_variables() {
  static const std::vector<std::string> names = {"HEAD_DIM", "DTYPE"};
  return names;
}

int64_t value_of_label(std::string_view variable, std::string_view label) {
  if (variable == "DTYPE") return static_cast<int64_t>(parse_dtype(label));
  throw InputError(std::string(variable) + " takes numbers, not '" + std::string(label) + "'");
}

std::string value_text(std::string_view variable, int64_t value) {
  if (variable == "DTYPE") return std::string(dtype_name(static_cast<DType>(value)));
  return std::to_string(value);
}

// e4m3 is only worth its bytes on the FP8 tensor cores: a kernel that widened it to 16 bits
// would pass every other gate.
std::string_view tensor_core_instruction(const Problem& p) {
  return shape_of(p).dtype == DType::kE4M3 ? "QGMMA" : "";
}

}  // namespace

const KernelFamily& family() {
  static const KernelFamily f{
      "attention",         kEmbedded_attention_reference, kEmbedded_attention_export_support,
      "1x8x512x64",        &variables,          &parse,
      &text,               &flops,              &bytes_moved,
      &require_tunable,    &submit_defaults,
      &group_of,           &distance,
      v1::Problem::kAttention, &to_proto,
      &from_proto,
      &served_variables,   &value_of_label,     &value_text,
      &tensor_core_instruction,
      &export_entry,       &model_wave_seconds,
  };
  return f;
}

}  // namespace evo::attention
