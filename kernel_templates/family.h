#pragma once
// A kernel family: what its kernels share, as evo's host code sees it. Its texts (the float32
// reference kernel of the correctness gate, the host code an export needs) and the operations on
// its problem (kernel_templates/problem.h): the variable names, the text grammar, the FLOP count,
// whether a problem may be tuned, the wire message. Each family defines one KernelFamily in
// kernel_templates/<family>/family.cpp; template_registry.cpp lists it in one line.
//
// A struct of function pointers, not an abstract class: a family is one constant table with no
// state, the members group by concern (each part of a family adds its own), and a missing member
// is a compile error at the family's one definition. Nothing here links CUDA.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "evo/evo.pb.h"
#include "family_export.h"
#include "family_model.h"
#include "problem.h"

namespace evo {

// Values, by variable name, that a problem text takes for the variables it leaves out (attention:
// CAUSAL for a text without ":causal" or ":nc", DTYPE without a dtype suffix).
using ProblemDefaults = std::map<std::string, int64_t, std::less<>>;

struct KernelFamily {
  std::string_view id;                // "attention": its folder and namespace under kernel_templates/
  std::string_view reference_source;  // float32 reference kernel(s) for the correctness gate
  // Host code an exported file needs besides the kernel (it encodes the tensor maps of a space
  // whose launch has "tensor_map_box_rows"); empty when there is none.
  std::string_view host_source;

  // ---- The problem (kernel_templates/<family>/problem.cpp).
  // The problem a run that names none tunes, as text ("1x8x512x64").
  std::string_view default_problem;
  // Its variables' names, in the order a Problem holds their values.
  const std::vector<std::string>& (*problem_variables)();
  // The grammar: throws InputError naming the text for one it refuses.
  Problem (*parse)(std::string_view text, const ProblemDefaults& defaults);
  std::string (*text)(const Problem& p);  // canonical: parse(text(p), {}) == p
  double (*flops)(const Problem& p);
  double (*bytes_moved)(const Problem& p);  // Problem::bytes_moved
  // For a problem to tune or evaluate (parse accepts more, so that stored runs still load):
  // throws InputError naming `text`, the problem as the user gave it.
  void (*require_tunable)(const Problem& p, std::string_view text);
  // The defaults a submit's own fields give (attention: causal, dtype).
  ProblemDefaults (*submit_defaults)(const v1::SubmitRunRequest& request);
  // Workloads (evoctl submit --workload): problems of one group may share a tuned kernel (the
  // group's text names what they share: "heads 32/8, head dim 128, causal, bf16, decode"), and
  // how far apart two problems of a group are, 0 for equal sizes: the exported dispatch takes the
  // nearest bucket by the same measure.
  std::string (*workload_group)(const Problem& p);
  double (*problem_distance)(const Problem& a, const Problem& b);
  // The wire form: the family's case of v1::Problem. from_proto throws InputError for values this
  // build does not know (a newer peer's enum value).
  v1::Problem::KindCase proto_kind;
  v1::Problem (*to_proto)(const Problem& p);
  Problem (*from_proto)(const v1::Problem& p);

  // ---- What a kernel serves (its space.json's "serves": {"HEAD_DIM": [64, 128], ...}).
  // The variables every kernel of the family must list there, with the values it is written for.
  const std::vector<std::string>& (*served_variables)();
  // A value as a space names it where the variable has labels (DTYPE "bf16"); throws InputError
  // naming the variable and what it expects. value_text is its inverse, numbers for the rest.
  int64_t (*value_of_label)(std::string_view variable, std::string_view label);
  std::string (*value_text)(std::string_view variable, int64_t value);

  // ---- The SASS gate: the tensor-core instruction a problem's kernel must hold (its mnemonic,
  // "QGMMA" for FP8 warpgroup MMA), or "" where any will do (HMMA, HGMMA or QGMMA).
  std::string_view (*tensor_core_instruction)(const Problem& p);

  // ---- The export (kernel_templates/<family>/export_entry.cpp): its part of an exported .cu.
  const FamilyExport& (*export_entry)();
  // ---- The model evaluator's estimate (kernel_templates/<family>/model_estimate.cpp): how long
  // one wave of its blocks lasts.
  ModelWaveSeconds model_wave_seconds;
};

// Every registered family, in template_registry.cpp's order.
const std::vector<const KernelFamily*>& families();

// Why `served_by` (a kernel's name) cannot serve p: "dtype bf16 is not served by fa_s512_v3 (it
// serves fp16)"; empty when each variable `served` lists has one of its values in p.
std::string unserved(const ServedValues& served, const Problem& p, std::string_view served_by);

// The wire forms, through the family that the message's case names. problem_from_proto throws
// InputError for a message that names no family of this build.
v1::Problem problem_to_proto(const Problem& p);
Problem problem_from_proto(const v1::Problem& p);

// The transition release's two forms of a list of problems (Lease, Run) and of a result's problem
// (ShapeResult): `problems`, and the attention Shape field a peer from before Problem reads. The
// readers take the Problem form and the older one only where it is unset.
void set_problems(const std::vector<Problem>& problems, google::protobuf::RepeatedPtrField<v1::Problem>* out,
                  google::protobuf::RepeatedPtrField<v1::Shape>* before);
std::vector<Problem> problems_of(const google::protobuf::RepeatedPtrField<v1::Problem>& problems,
                                 const google::protobuf::RepeatedPtrField<v1::Shape>& before);
void set_result_problem(const Problem& p, v1::ShapeResult* result);
// Throws InputError for a result with neither form.
Problem result_problem(const v1::ShapeResult& result);

}  // namespace evo
