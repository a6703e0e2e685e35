#pragma once
// Integer expressions of a search space (.space.json): int64 literals, identifiers, + - * / %,
// unary - and !, < <= > >= == !=, && || (short-circuit), parentheses, min(a,b), max(a,b).
// Comparisons and logic yield 0 or 1; / and % truncate as in C++ (the kernel computes the same way).
// Parsed once when a space loads; evaluated many times against a variable map, or emitted as C++
// (the exporter).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

class Expression {
 public:
  // Throws InputError naming the expression and the position of the first thing it cannot read.
  static Expression parse(std::string_view text);

  // Throws InputError for an identifier missing from `vars`, a division by zero or an int64
  // overflow, naming the expression.
  int64_t eval(const std::map<std::string, int64_t>& vars) const;

  // The expression with each identifier resolved to a slot, evaluated against an array of values
  // in the slots' order: no names and no map on the way, for the loops that check every genome of
  // a space. eval() throws as the map's eval() does.
  class Bound {
   public:
    int64_t eval(const int64_t* values) const;
    struct Op;  // defined in expression.cpp

   private:
    friend class Expression;
    std::string text_;
    std::shared_ptr<const std::vector<Op>> ops_;  // post-order: the root is the last
  };
  // slot_of(name): the identifier's index in the values eval() will read; it throws for a name it
  // does not know.
  Bound bind(const std::function<size_t(const std::string&)>& slot_of) const;

  // Every identifier the expression reads (min/max excluded), to validate a space at load.
  std::set<std::string> identifiers() const;
  // The same expression as C++ source (the exporter's back end, beside eval()): identifiers as
  // named, literals as long long ("16LL"), min/max as evo_min/evo_max, which the caller defines
  // over long long; parentheses where C++ would otherwise bind differently.
  std::string cxx() const;
  const std::string& text() const { return text_; }

  struct Node;  // defined in expression.cpp

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;  // immutable once parsed: copies share it
};

}  // namespace evo
