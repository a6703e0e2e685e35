#include "wire_labels.h"

#include <google/protobuf/descriptor.h>

#include <cctype>

namespace evo {

namespace {

namespace pb = google::protobuf;

// GATE_TENSOR_CORES -> "tensor_cores": the name after the prefix its UNSPECIFIED value shows.
std::string label_of(const pb::EnumValueDescriptor& v) {
  const std::string& unspecified = v.type()->value(0)->name();  // "GATE_UNSPECIFIED"
  const size_t prefix = unspecified.size() - std::string_view("UNSPECIFIED").size();
  std::string out = v.name().substr(prefix);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

template <class E>
std::string label(E value) {
  if (value == E{}) return "";
  const pb::EnumValueDescriptor* v = pb::GetEnumDescriptor<E>()->FindValueByNumber(value);
  return v == nullptr ? "" : label_of(*v);
}

template <class E>
std::optional<E> parse_label(std::string_view text) {
  const pb::EnumDescriptor* d = pb::GetEnumDescriptor<E>();
  for (int i = 1; i < d->value_count(); ++i)  // value 0 is UNSPECIFIED, which no label names
    if (label_of(*d->value(i)) == text) return static_cast<E>(d->value(i)->number());
  return std::nullopt;
}

template <class E>
std::string label_list() {
  const pb::EnumDescriptor* d = pb::GetEnumDescriptor<E>();
  std::string out;
  for (int i = 1; i < d->value_count(); ++i) out += (out.empty() ? "" : ", ") + label_of(*d->value(i));
  return out;
}

namespace {
std::string dtype_label(const pb::EnumValueDescriptor& v) {
  std::string out = v.name().substr(std::string_view("DTYPE_").size());
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

std::optional<v1::DType> parse_dtype_label(std::string_view text) {
  const pb::EnumDescriptor* d = v1::DType_descriptor();
  for (int i = 0; i < d->value_count(); ++i)
    if (dtype_label(*d->value(i)) == text) return static_cast<v1::DType>(d->value(i)->number());
  return std::nullopt;
}

std::string dtype_label_choices() {
  const pb::EnumDescriptor* d = v1::DType_descriptor();
  std::string out;
  for (int i = 0; i < d->value_count(); ++i)
    out += (i == 0 ? "" : i + 1 == d->value_count() ? " or " : ", ") + dtype_label(*d->value(i));
  return out;
}

void set_gate_forms(v1::GateVerdict& g, v1::Gate kind, v1::Verdict outcome) {
  g.set_kind(kind);
  g.set_outcome(outcome);
  g.set_gate(label(kind));
  g.set_verdict(label(outcome));
}

void fill_gate_forms(v1::Evaluation& e) {
  for (auto& g : *e.mutable_gates()) {
    g.set_kind(gate_of(g));
    g.set_outcome(verdict_of(g));
    if (g.gate().empty()) g.set_gate(label(g.kind()));
    if (g.verdict().empty()) g.set_verdict(label(g.outcome()));
  }
}

#define EVO_WIRE_LABELS(E)                                  \
  template std::string label<E>(E);                         \
  template std::optional<E> parse_label<E>(std::string_view); \
  template std::string label_list<E>();
EVO_WIRE_LABELS(v1::Gate)
EVO_WIRE_LABELS(v1::Verdict)
EVO_WIRE_LABELS(v1::SearchStrategy)
EVO_WIRE_LABELS(v1::FitnessInputs)
EVO_WIRE_LABELS(v1::CandidateState)
EVO_WIRE_LABELS(v1::ResultSource)
EVO_WIRE_LABELS(v1::StopReason)
#undef EVO_WIRE_LABELS

}  // namespace evo
