#pragma once
// The search space's formulas are C-compatible integer expressions over named values. The
// exporter does not evaluate them: it checks every name, renames min/max to inline helpers, and
// lets the C++ compiler evaluate them in the exported source, so the exported kernel computes its
// launch exactly as the space defines it.
#include <set>
#include <string>
#include <string_view>

namespace evo {

struct CxxExpression {
  std::string code;              // C++ text with min/max renamed to evo_min/evo_max
  std::set<std::string> names;   // every variable it reads
};

// Throws InputError("<what> 'expr': unknown name 'X'") for a name outside `known`, and for a
// character that has no place in an integer formula.
CxxExpression to_cxx_expression(std::string_view expr, const std::set<std::string>& known,
                                std::string_view what);

}  // namespace evo
