#include "exporter_expr.h"

#include <cctype>

#include "errors.h"

namespace evo {

CxxExpression to_cxx_expression(std::string_view expr, const std::set<std::string>& known,
                                std::string_view what) {
  auto fail = [&](const std::string& why) {
    throw InputError(std::string(what) + " '" + std::string(expr) + "': " + why);
  };
  CxxExpression out;
  size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_')) ++j;
      const std::string name(expr.substr(i, j - i));
      if (name == "min" || name == "max") {
        out.code += "evo_" + name;
      } else if (known.count(name)) {
        out.code += name;
        out.names.insert(name);
      } else {
        fail("unknown name '" + name + "'");
      }
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < expr.size() && std::isdigit(static_cast<unsigned char>(expr[j]))) ++j;
      out.code += std::string(expr.substr(i, j - i)) + "LL";  // 64-bit: smem and grid products
      i = j;
    } else if (std::string_view("+-*/%()<>=!&|, ").find(c) != std::string_view::npos) {
      out.code += c;
      ++i;
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
  }
  if (out.code.find_first_not_of(' ') == std::string::npos) fail("empty expression");
  return out;
}

}  // namespace evo
