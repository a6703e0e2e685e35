#pragma once
// The text labels of the wire's enums (evo.proto): a gate ("tensor_cores"), a verdict ("not_run"),
// a search strategy ("evolve"), fitness inputs ("resident"), a candidate state ("queued"), a result
// source ("cache"), why a run stopped ("budget_spent"). People type and read the labels, the store keeps them in its text columns, and
// peers from before the enum fields sent only them. A label is the value's name less its enum's
// prefix, lowercased (GATE_TENSOR_CORES: "tensor_cores"), so evo.proto is their one home.
//
// Text is parsed once where it enters (a flag, a stored row, an older peer's field); the code
// between passes the enums.
#include <optional>
#include <string>
#include <string_view>

#include "evo/evo.pb.h"

namespace evo {

// The label of a value; "" for the UNSPECIFIED value and for a number this build does not know.
template <class E>
std::string label(E value);

// The value a label names; nullopt for any other text ("" and "unspecified" included).
template <class E>
std::optional<E> parse_label(std::string_view text);

// Every label of the enum in its order, "evolve, random, exhaustive", for errors and help.
template <class E>
std::string label_list();

// A field pair of the transition release: the enum when the peer set it, else the value its text
// field names (an older peer's), else UNSPECIFIED.
template <class E>
E enum_or_label(E value, std::string_view text) {
  if (value != E{}) return value;
  return parse_label<E>(text).value_or(E{});
}

// A gate's kind and verdict as enum_or_label reads them.
inline v1::Gate gate_of(const v1::GateVerdict& g) { return enum_or_label(g.kind(), g.gate()); }
inline v1::Verdict verdict_of(const v1::GateVerdict& g) { return enum_or_label(g.outcome(), g.verdict()); }

// evo.v1.DType, whose zero value is a dtype (fp16), not UNSPECIFIED: a label is the name less
// "DTYPE_", lowercased ("bf16"); nullopt for any other text. The choices read "fp16, bf16 or e4m3".
std::optional<v1::DType> parse_dtype_label(std::string_view text);
std::string dtype_label_choices();

// Sets a gate's kind and outcome, and for older peers their labels.
void set_gate_forms(v1::GateVerdict& g, v1::Gate kind, v1::Verdict outcome);

// Gives every gate both forms: the enum its text names (an evaluation from an older worker or an
// older store) and the text of its enum (for older peers reading a new one).
void fill_gate_forms(v1::Evaluation& e);

}  // namespace evo
