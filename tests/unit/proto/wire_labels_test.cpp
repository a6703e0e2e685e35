// The labels of the wire's enums: what people type, the store's text columns hold and peers from
// before the enum fields sent. A renamed enum value would change them all; these tests say so.
#include <gtest/gtest.h>

#include "wire_labels.h"

namespace evo {
namespace {

TEST(WireLabels, EveryValueHasTheLabelPeopleAndOlderPeersUse) {
  EXPECT_EQ(label_list<v1::Gate>(), "valid, compile, tensor_cores, correct, timed, sanitizer");
  EXPECT_EQ(label_list<v1::Verdict>(), "passed, failed, skipped, not_run");
  EXPECT_EQ(label_list<v1::SearchStrategy>(), "evolve, random, exhaustive, surrogate");
  EXPECT_EQ(label_list<v1::FitnessInputs>(), "rotated, resident");
  EXPECT_EQ(label_list<v1::CandidateState>(), "queued, leased, done");
  EXPECT_EQ(label_list<v1::ResultSource>(), "measured, cache");
  EXPECT_EQ(label(v1::GATE_TENSOR_CORES), "tensor_cores");
  EXPECT_EQ(label(v1::VERDICT_NOT_RUN), "not_run");
}

TEST(WireLabels, ALabelParsesToItsValueAndNothingElseParses) {
  EXPECT_EQ(parse_label<v1::Gate>("tensor_cores"), v1::GATE_TENSOR_CORES);
  EXPECT_EQ(parse_label<v1::SearchStrategy>("exhaustive"), v1::SEARCH_STRATEGY_EXHAUSTIVE);
  for (const char* text : {"", "unspecified", "UNSPECIFIED", "Evolve", "GATE_VALID", "valid "})
    EXPECT_FALSE(parse_label<v1::Gate>(text)) << text;
  EXPECT_FALSE(parse_label<v1::SearchStrategy>("annealing"));
}

TEST(WireLabels, UnspecifiedAndUnknownNumbersHaveNoLabel) {
  EXPECT_EQ(label(v1::GATE_UNSPECIFIED), "");
  EXPECT_EQ(label(static_cast<v1::Verdict>(99)), "");
}

// The transition release: the enum first, the label of an older peer where the enum is unset.
TEST(WireLabels, TheEnumComesFirstAndTheLabelServesAnOlderPeer) {
  v1::GateVerdict g;
  g.set_gate("compile");
  g.set_verdict("failed");
  EXPECT_EQ(gate_of(g), v1::GATE_COMPILE);
  EXPECT_EQ(verdict_of(g), v1::VERDICT_FAILED);
  g.set_kind(v1::GATE_TIMED);
  EXPECT_EQ(gate_of(g), v1::GATE_TIMED);
  g.clear_gate();
  g.clear_kind();
  EXPECT_EQ(gate_of(g), v1::GATE_UNSPECIFIED);
}

TEST(WireLabels, FillingGivesEveryGateBothForms) {
  v1::Evaluation e;
  auto* old = e.add_gates();  // from a worker, or a stored blob, before the enums
  old->set_gate("sanitizer");
  old->set_verdict("skipped");
  set_gate_forms(*e.add_gates(), v1::GATE_VALID, v1::VERDICT_PASSED);
  auto* bare = e.add_gates();  // enums only, as a release after the transition may send
  bare->set_kind(v1::GATE_CORRECT);
  bare->set_outcome(v1::VERDICT_NOT_RUN);
  fill_gate_forms(e);
  EXPECT_EQ(e.gates(0).kind(), v1::GATE_SANITIZER);
  EXPECT_EQ(e.gates(0).outcome(), v1::VERDICT_SKIPPED);
  EXPECT_EQ(e.gates(1).gate(), "valid");
  EXPECT_EQ(e.gates(1).verdict(), "passed");
  EXPECT_EQ(e.gates(2).gate(), "correct");
  EXPECT_EQ(e.gates(2).verdict(), "not_run");
}

}  // namespace
}  // namespace evo
