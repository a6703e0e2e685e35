// evo::Problem and the family operations core code reaches it through, on the attention family:
// the values in the family's order, the grammar behind parse and text, the defaults, the wire
// form, and the transition release's older fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "attention/problem.h"
#include "errors.h"
#include "family.h"
#include "template_registry.h"

namespace evo {
namespace {

const KernelFamily& family() { return attention::family(); }

TEST(ProblemTest, HoldsTheFamilysVariablesInItsOrder) {
  const Problem p = family().parse("2x16x1000x2000x128:causal:bf16", {});
  EXPECT_EQ(&p.family(), &family());
  EXPECT_EQ(p.values(), (std::vector<int64_t>{2, 16, 16, 1000, 2000, 128, 1, 1, 0}));
  EXPECT_EQ(p.value("SEQ_K"), 2000);
  EXPECT_EQ(p.variables(), (std::map<std::string, int64_t>{{"BATCH", 2}, {"HEADS", 16}, {"HEADS_KV", 16},
                                                          {"SEQ_Q", 1000}, {"SEQ_K", 2000}, {"HEAD_DIM", 128},
                                                          {"CAUSAL", 1}, {"DTYPE", 1}, {"VARLEN", 0}}));
  EXPECT_THROW(p.value("BLOCK_M"), std::out_of_range);
  EXPECT_EQ(p.text(), "2x16x1000x2000x128:causal:bf16");
  // Bottom-right causal: 1000 rows see 1000..1999 of the 2000 keys, 1000 * 2000 - 1000^2 / 2 pairs.
  EXPECT_DOUBLE_EQ(p.flops(), 4.0 * 2 * 16 * 128 * (1000.0 * 2000 - 1000.0 * 1000 / 2));
  EXPECT_EQ(family().parse("2x32x64x128:kv8", {}).value("HEADS_KV"), 8);
}

TEST(ProblemTest, AnEmptyProblemOrAWrongCountIsRefused) {
  EXPECT_TRUE(Problem{}.empty());
  EXPECT_THROW(Problem{}.family(), std::logic_error);
  EXPECT_THROW(Problem{}.text(), std::logic_error);
  EXPECT_THROW(Problem(family(), {1, 2, 3}), std::invalid_argument);
}

// Every text stored before Problem (runs, result-cache keys) reads back to the same text.
TEST(ProblemTest, StoredTextsPrintAsTheyWere) {
  for (const char* text : {"1x8x512x64", "1x8x512x64:causal", "1x8x512x64:causal:bf16", "1x8x512x64:bf16",
                           "1x8x512x1024x64", "2x16x4096x128:causal"})
    EXPECT_EQ(family().parse(text, {}).text(), text);
  EXPECT_EQ(family().parse("1x8x512x64:fp16:nc", {}).text(), "1x8x512x64");
}

TEST(ProblemTest, DefaultsApplyWhereTheTextNamesNone) {
  const ProblemDefaults causal_bf16 = {{"CAUSAL", 1}, {"DTYPE", 1}};
  EXPECT_EQ(family().parse("1x8x512x64", causal_bf16).text(), "1x8x512x64:causal:bf16");
  EXPECT_EQ(family().parse("1x8x512x64:nc:fp16", causal_bf16).text(), "1x8x512x64");
  EXPECT_THROW(family().parse("1x8x512x64", {{"DTYPE", 7}}), InputError);
  EXPECT_THROW(family().parse("1x8x512x64", {{"BLOCK_M", 1}}), InputError);

  v1::SubmitRunRequest req;
  EXPECT_EQ(family().submit_defaults(req), (ProblemDefaults{{"CAUSAL", 0}, {"DTYPE", 0}}));
  req.set_causal(true);
  req.set_dtype(v1::DTYPE_BF16);
  EXPECT_EQ(family().submit_defaults(req), causal_bf16);
  req.set_dtype(static_cast<v1::DType>(9));  // a newer peer's dtype
  EXPECT_THROW(family().submit_defaults(req), InputError);
}

TEST(ProblemTest, RequireTunableRefusesCausalWithMoreQueriesThanKeys) {
  EXPECT_NO_THROW(family().require_tunable(family().parse("1x8x512x64:causal", {}), "x"));
  EXPECT_NO_THROW(family().require_tunable(family().parse("1x8x512x1024x64", {}), "x"));
  EXPECT_NO_THROW(family().require_tunable(family().parse("1x8x512x1024x64:causal", {}), "x"));
  EXPECT_THROW(family().require_tunable(family().parse("1x8x1024x512x64:causal", {}), "x"), InputError);
}

TEST(ProblemTest, TheDefaultProblemParses) {
  EXPECT_EQ(family().parse(family().default_problem, {}), attention::to_problem(attention::Shape{}));
}

TEST(ProblemTest, TheWireFormRoundTripsThroughTheFamilysCase) {
  const Problem p = family().parse("2x4x256x512x128:bf16", {});
  const v1::Problem m = problem_to_proto(p);
  ASSERT_EQ(m.kind_case(), v1::Problem::kAttention);
  EXPECT_EQ(m.attention().seq_k(), 512);
  EXPECT_EQ(m.attention().dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(problem_from_proto(m), p);
  EXPECT_THROW(problem_from_proto(v1::Problem{}), InputError) << "a message of no family";
  v1::Problem newer = m;
  newer.mutable_attention()->set_dtype(static_cast<v1::DType>(9));
  EXPECT_THROW(problem_from_proto(newer), InputError);
}

// Lists and results carry both forms for one release; a message from before Problem has only the
// attention Shape, and reads as that.
TEST(ProblemTest, TheTransitionFormsAreWrittenAndReadBack) {
  const std::vector<Problem> problems = {family().parse("1x8x512x64", {}), family().parse("2x8x1024x128:causal", {})};
  v1::Lease lease;
  set_problems(problems, lease.mutable_problems(), lease.mutable_shapes());
  ASSERT_EQ(lease.problems_size(), 2);
  ASSERT_EQ(lease.shapes_size(), 2);
  EXPECT_EQ(lease.shapes(1).head_dim(), 128);
  EXPECT_EQ(problems_of(lease.problems(), lease.shapes()), problems);

  v1::Lease older;  // from an evod before Problem
  *older.mutable_shapes() = lease.shapes();
  EXPECT_EQ(problems_of(older.problems(), older.shapes()), problems);

  v1::ShapeResult r;
  set_result_problem(problems[1], &r);
  EXPECT_TRUE(r.has_problem());
  EXPECT_EQ(r.shape().seq_q(), 1024);
  EXPECT_EQ(result_problem(r), problems[1]);
  r.clear_problem();  // stored before Problem
  EXPECT_EQ(result_problem(r), problems[1]);
  EXPECT_THROW(result_problem(v1::ShapeResult{}), InputError);
}

TEST(ProblemTest, EveryTemplatesFamilyIsRegistered) {
  for (const auto& id : template_ids()) {
    const KernelFamily* f = find_template(id)->family;
    EXPECT_NE(std::find(families().begin(), families().end(), f), families().end()) << id;
  }
}

}  // namespace
}  // namespace evo
