// libFuzzer target: the search-space expression parser and evaluator on arbitrary bytes. Parsing
// and evaluating must end in a value or InputError (unknown identifier, division by zero, int64
// overflow), never in a crash, a hang on deep nesting, or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "errors.h"
#include "expression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  evo::Expression e;
  try {
    e = evo::Expression::parse(text);
  } catch (const evo::InputError&) {
    return 0;
  }
  // Values that provoke the edge cases: zero, -1, and the int64 extremes.
  static const std::map<std::string, int64_t> kVars = {
      {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"WARPS", 4}, {"STAGES", 2}, {"HEAD_DIM", 64}, {"ZERO", 0},
      {"MINUS_ONE", -1}, {"MAX", INT64_MAX}, {"MIN", INT64_MIN}, {"a", 1}, {"b", 2}, {"x", 3}};
  std::map<std::string, int64_t> vars = kVars;
  for (const auto& name : e.identifiers()) vars.emplace(name, static_cast<int64_t>(name.size()));
  try {
    (void)e.eval(vars);
  } catch (const evo::InputError&) {
  }
  try {
    (void)e.eval({});
  } catch (const evo::InputError&) {
  }
  return 0;
}
