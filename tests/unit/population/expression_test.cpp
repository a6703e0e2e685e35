#include <gtest/gtest.h>

#include <regex>

#include "attention/problem.h"
#include "device_limits.h"
#include "errors.h"
#include "expression.h"
#include "search_space.h"

namespace evo {
namespace {

// An attention problem as core code holds it, from its text.
Problem problem(std::string_view text) { return attention::to_problem(attention::parse_shape(text)); }

int64_t eval(const std::string& text, const std::map<std::string, int64_t>& vars = {}) {
  return Expression::parse(text).eval(vars);
}

std::string error_of(const std::string& text, const std::map<std::string, int64_t>& vars = {}) {
  try {
    eval(text, vars);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ExpressionTest, Precedence) {
  EXPECT_EQ(eval("2 + 3 * 4"), 14);
  EXPECT_EQ(eval("(2 + 3) * 4"), 20);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);  // left associative
  EXPECT_EQ(eval("100 / 10 / 5"), 2);
  EXPECT_EQ(eval("7 % 4 * 2"), 6);
  EXPECT_EQ(eval("1 + 2 < 4"), 1);
  EXPECT_EQ(eval("1 < 2 == 1"), 1);   // relational binds tighter than equality
  EXPECT_EQ(eval("0 || 1 && 0"), 0);  // && binds tighter than ||
  EXPECT_EQ(eval("1 || 0 && 0"), 1);
  EXPECT_EQ(eval("-2 * -3"), 6);
  EXPECT_EQ(eval("!0 + 1"), 2);
  EXPECT_EQ(eval("!(3 > 2)"), 0);
  EXPECT_EQ(eval("- -5"), 5);
}

TEST(ExpressionTest, ComparisonsYieldZeroOrOne) {
  EXPECT_EQ(eval("3 < 5"), 1);
  EXPECT_EQ(eval("5 <= 5"), 1);
  EXPECT_EQ(eval("5 > 5"), 0);
  EXPECT_EQ(eval("5 >= 6"), 0);
  EXPECT_EQ(eval("4 == 4"), 1);
  EXPECT_EQ(eval("4 != 4"), 0);
  EXPECT_EQ(eval("7 && 9"), 1);
  EXPECT_EQ(eval("0 || 9"), 1);
}

TEST(ExpressionTest, TruncatingDivisionLikeCpp) {
  EXPECT_EQ(eval("-7 / 2"), -3);
  EXPECT_EQ(eval("-7 % 2"), -1);
  EXPECT_EQ(eval("(512 + 32 - 1) / 32"), 16);
}

TEST(ExpressionTest, VariablesAndFunctions) {
  std::map<std::string, int64_t> v{{"WARPS", 4}, {"BLOCK_M", 32}, {"x_1", 3}};
  EXPECT_EQ(eval("min(WARPS, BLOCK_M / 16)", v), 2);
  EXPECT_EQ(eval("max(WARPS, BLOCK_M / 16) * x_1", v), 12);
  EXPECT_EQ(eval("min(max(1, 5), 3)", v), 3);
  EXPECT_EQ(eval("9223372036854775807"), INT64_MAX);
}

TEST(ExpressionTest, ShortCircuitAvoidsDivisionByZero) {
  EXPECT_EQ(eval("X != 0 && 10 / X > 1", {{"X", 0}}), 0);
  EXPECT_EQ(eval("X == 0 || 10 / X > 1", {{"X", 0}}), 1);
}

TEST(ExpressionTest, IdentifiersAreListed) {
  auto ids = Expression::parse("min(A, B) + A * C").identifiers();
  EXPECT_EQ(ids, (std::set<std::string>{"A", "B", "C"}));
}

TEST(ExpressionTest, EvaluationErrorsNameTheExpression) {
  EXPECT_EQ(error_of("4 / (X - 2)", {{"X", 2}}), "division by zero in '4 / (X - 2)'");
  EXPECT_EQ(error_of("4 % 0"), "division by zero in '4 % 0'");
  EXPECT_EQ(error_of("A + FOO", {{"A", 1}}), "unknown identifier 'FOO' in 'A + FOO'");
  EXPECT_EQ(error_of("9223372036854775807 + 1"), "integer overflow in '9223372036854775807 + 1'");
  EXPECT_EQ(error_of("X * X", {{"X", int64_t{1} << 40}}), "integer overflow in 'X * X'");
  EXPECT_EQ(error_of("-X", {{"X", INT64_MIN}}), "integer overflow in '-X'");
  EXPECT_EQ(error_of("X / -1", {{"X", INT64_MIN}}), "integer overflow in 'X / -1'");
}

// The slot-bound form computes what the map form computes, and fails alike.
TEST(ExpressionTest, BoundToSlotsItEvaluatesAndFailsAsTheMapDoes) {
  const std::vector<std::string> names = {"A", "B", "X"};
  auto slot_of = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    throw InputError("unknown identifier '" + name + "'");
  };
  const char* texts[] = {"A + B * X", "min(A, B) - max(X, 3) % 4", "!(A < B) || X >= 2 && B != 0",
                         "-A / (B - X)", "A <= B == (X > 1)", "B == 0 || A / B > 1"};
  for (const int64_t a : {-7, 0, 5}) {
    for (const int64_t b : {0, 3}) {
      const std::map<std::string, int64_t> vars = {{"A", a}, {"B", b}, {"X", 2}};
      const int64_t values[] = {a, b, 2};
      for (const char* text : texts) {
        const Expression e = Expression::parse(text);
        std::string by_map, by_slots;
        int64_t map_value = 0, slot_value = 0;
        try { map_value = e.eval(vars); } catch (const InputError& err) { by_map = err.what(); }
        try { slot_value = e.bind(slot_of).eval(values); } catch (const InputError& err) { by_slots = err.what(); }
        EXPECT_EQ(by_slots, by_map) << text << " at A=" << a << " B=" << b;
        EXPECT_EQ(slot_value, map_value) << text << " at A=" << a << " B=" << b;
      }
    }
  }
  const int64_t big[] = {INT64_MIN, 1, 2};
  EXPECT_THROW(Expression::parse("-A").bind(slot_of).eval(big), InputError);
  EXPECT_THROW(Expression::parse("A + FOO").bind(slot_of), InputError);
}

TEST(ExpressionTest, SyntaxErrorsNameExpressionAndPosition) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "unexpected end"},
      {"1 +", "unexpected end"},
      {"(1 + 2", "expected ')'"},
      {"1 + 2)", "unexpected ')'"},
      {"1 = 2", "unexpected '='"},
      {"1 & 2", "unexpected '&'"},
      {"1 | 2", "unexpected '|'"},
      {"min(1)", "expected ','"},
      {"min(1, 2", "expected ')'"},
      {"pow(2, 3)", "unknown function 'pow'"},
      {"2x", "unexpected 'x'"},
      {"1 2", "unexpected '2'"},
      {"99999999999999999999", "literal out of int64 range"},
      {"$", "unexpected '$'"},
  };
  for (const auto& [text, message] : cases) {
    try {
      Expression::parse(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InputError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(message), std::string::npos) << text << " -> " << what;
      EXPECT_NE(what.find("bad expression '" + std::string(text) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("at position"), std::string::npos) << what;
    }
  }
}

// The C++ back end (the exporter's): long long literals, min/max renamed, and parentheses
// exactly where C++ would otherwise group differently.
TEST(ExpressionTest, CxxKeepsTheGroupingAndRenamesMinMax) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"max(A, min(B, 16))", "evo_max(A, evo_min(B, 16LL))"},
      {"TMA * min(TMA_BOX_ROWS, BLOCK_N)", "TMA * evo_min(TMA_BOX_ROWS, BLOCK_N)"},
      {"2 + 3 * 4", "2LL + 3LL * 4LL"},
      {"(2 + 3) * 4", "(2LL + 3LL) * 4LL"},
      {"10 - 4 - 3", "10LL - 4LL - 3LL"},
      {"10 - (4 - 3)", "10LL - (4LL - 3LL)"},
      {"A / (B * C)", "A / (B * C)"},
      {"- -A", "-(-A)"},
      {"-(A + B)", "-(A + B)"},
      {"!(A == 0) || B && C", "!(A == 0LL) || (B && C)"},
      {"(A || B) && C", "(A || B) && C"},
      {"A == 0 || (B < 2 && C >= 3)", "A == 0LL || (B < 2LL && C >= 3LL)"},
      {"1 < 2 == 1", "1LL < 2LL == 1LL"},
  };
  for (const auto& [text, code] : cases) EXPECT_EQ(Expression::parse(text).cxx(), code) << text;
}

// Read back as an expression (the renames undone), the C++ of every formula of the real space
// evaluates as the formula does, genome after genome.
TEST(ExpressionTest, CxxOfEveryFormulaOfTheSpaceMeansTheSame) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  std::vector<Formula> formulas = space.derived();
  for (auto list : {space.constraints(), space.launch_formulas()}) formulas.insert(formulas.end(), list.begin(), list.end());
  // Each formula's C++ read back once; the genomes then only evaluate.
  std::vector<std::pair<std::string, Expression>> read_back;
  for (const Formula& f : formulas) {
    const std::string back = std::regex_replace(std::regex_replace(f.expr.cxx(), std::regex("(\\d)LL"), "$1"),
                                                std::regex("evo_(min|max)"), "$1");
    read_back.emplace_back(back, Expression::parse(back));
  }
  int compared = 0;
  for (uint64_t i = 0; i < space.size(); i += 997) {
    for (const char* shape : {"2x4x1000x64", "1x8x512x128:causal"}) {
      const auto vars = space.variables(space.at(i), problem(shape), kDefaultSmemLimit, 90);
      for (size_t k = 0; k < formulas.size(); ++k) {
        EXPECT_EQ(read_back[k].second.eval(vars), formulas[k].expr.eval(vars))
            << formulas[k].name << ": " << read_back[k].first;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(ExpressionTest, DeepNestingIsAnErrorNotACrash) {
  EXPECT_THROW(Expression::parse(std::string(100000, '-') + "1"), InputError);
  EXPECT_THROW(Expression::parse(std::string(100000, '(') + "1"), InputError);
  EXPECT_EQ(eval(std::string(50, '(') + "1" + std::string(50, ')')), 1);
}

}  // namespace
}  // namespace evo
