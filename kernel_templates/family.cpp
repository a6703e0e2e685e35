#include "family.h"

#include <algorithm>
#include <cctype>

#include "attention/problem.h"
#include "errors.h"

namespace evo {

std::string unserved(const ServedValues& served, const Problem& p, std::string_view served_by) {
  const KernelFamily& f = p.family();
  for (const auto& [variable, values] : served) {
    const int64_t value = p.value(variable);
    if (std::find(values.begin(), values.end(), value) != values.end()) continue;
    std::string listed;
    for (int64_t v : values) listed += (listed.empty() ? "" : ", ") + f.value_text(variable, v);
    std::string name = variable;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return name + " " + f.value_text(variable, value) + " is not served by " + std::string(served_by) +
           " (it serves " + listed + ")";
  }
  return "";
}

v1::Problem problem_to_proto(const Problem& p) { return p.family().to_proto(p); }

Problem problem_from_proto(const v1::Problem& p) {
  for (const KernelFamily* f : families())
    if (f->proto_kind == p.kind_case()) return f->from_proto(p);
  throw InputError("a problem of no kernel family this build knows (case " + std::to_string(p.kind_case()) + ")");
}

// The form from before Problem is the attention family's Shape: the only family there was.
void set_problems(const std::vector<Problem>& problems, google::protobuf::RepeatedPtrField<v1::Problem>* out,
                  google::protobuf::RepeatedPtrField<v1::Shape>* before) {
  for (const Problem& p : problems) {
    *out->Add() = problem_to_proto(p);
    if (&p.family() == &attention::family()) *before->Add() = attention::shape_to_proto(attention::shape_of(p));
  }
}

std::vector<Problem> problems_of(const google::protobuf::RepeatedPtrField<v1::Problem>& problems,
                                 const google::protobuf::RepeatedPtrField<v1::Shape>& before) {
  std::vector<Problem> out;
  for (const auto& p : problems) out.push_back(problem_from_proto(p));
  if (problems.empty())
    for (const auto& s : before) out.push_back(attention::to_problem(attention::shape_from_proto(s)));
  return out;
}

void set_result_problem(const Problem& p, v1::ShapeResult* result) {
  *result->mutable_problem() = problem_to_proto(p);
  if (&p.family() == &attention::family())
    *result->mutable_shape() = attention::shape_to_proto(attention::shape_of(p));
}

Problem result_problem(const v1::ShapeResult& result) {
  if (result.has_problem()) return problem_from_proto(result.problem());
  if (result.has_shape()) return attention::to_problem(attention::shape_from_proto(result.shape()));
  throw InputError("a result names no problem");
}

}  // namespace evo
