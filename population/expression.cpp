#include "expression.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <vector>

#include "errors.h"

namespace evo {

struct Expression::Node {
  enum class Kind { kLiteral, kIdentifier, kNegate, kNot, kBinary, kMin, kMax };
  Kind kind = Kind::kLiteral;
  int64_t value = 0;  // kLiteral
  std::string name;   // kIdentifier; the operator's spelling for kBinary
  std::shared_ptr<const Node> lhs, rhs;
};

struct Expression::Bound::Op {
  enum class Code { kLiteral, kSlot, kNegate, kNot, kMin, kMax, kAnd, kOr, kAdd, kSub, kMul, kDiv, kMod,
                    kLt, kLe, kGt, kGe, kEq, kNe };
  Code code = Code::kLiteral;
  int64_t value = 0;  // kLiteral's value, kSlot's index
  int lhs = -1, rhs = -1;
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<const Node>;

NodePtr make(Node::Kind kind, NodePtr lhs = nullptr, NodePtr rhs = nullptr, std::string name = {}) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->lhs = std::move(lhs);
  n->rhs = std::move(rhs);
  n->name = std::move(name);
  return n;
}

// Recursive descent, one function per precedence level, lowest first:
//   or: and ('||' and)*      and: eq ('&&' eq)*      eq: rel (('=='|'!=') rel)*
//   rel: add (('<'|'<='|'>'|'>=') add)*   add: mul (('+'|'-') mul)*   mul: unary (('*'|'/'|'%') unary)*
//   unary: ('-'|'!') unary | primary
//   primary: literal | identifier | ('min'|'max') '(' or ',' or ')' | '(' or ')'
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  NodePtr parse_all() {
    NodePtr n = parse_or();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError("bad expression '" + std::string(text_) + "': " + why + " at position " +
                     std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // Consumes `op` if it comes next (and is not the first half of a longer operator).
  bool accept(std::string_view op) {
    skip_space();
    if (text_.substr(pos_, op.size()) != op) return false;
    if (op.size() == 1 && (op == "<" || op == ">" || op == "!") && pos_ + 1 < text_.size() &&
        text_[pos_ + 1] == '=')
      return false;
    pos_ += op.size();
    return true;
  }
  void expect(std::string_view op) {
    if (!accept(op)) fail("expected '" + std::string(op) + "'");
  }

  NodePtr parse_or() {
    NodePtr n = parse_and();
    while (accept("||")) n = make(Node::Kind::kBinary, n, parse_and(), "||");
    return n;
  }
  NodePtr parse_and() {
    NodePtr n = parse_eq();
    while (accept("&&")) n = make(Node::Kind::kBinary, n, parse_eq(), "&&");
    return n;
  }
  NodePtr parse_eq() {
    NodePtr n = parse_rel();
    while (true) {
      if (accept("=="))
        n = make(Node::Kind::kBinary, n, parse_rel(), "==");
      else if (accept("!="))
        n = make(Node::Kind::kBinary, n, parse_rel(), "!=");
      else
        return n;
    }
  }
  NodePtr parse_rel() {
    NodePtr n = parse_add();
    while (true) {
      std::string op;
      for (const char* o : {"<=", ">=", "<", ">"})
        if (accept(o)) {
          op = o;
          break;
        }
      if (op.empty()) return n;
      n = make(Node::Kind::kBinary, n, parse_add(), op);
    }
  }
  NodePtr parse_add() {
    NodePtr n = parse_mul();
    while (true) {
      if (accept("+"))
        n = make(Node::Kind::kBinary, n, parse_mul(), "+");
      else if (accept("-"))
        n = make(Node::Kind::kBinary, n, parse_mul(), "-");
      else
        return n;
    }
  }
  NodePtr parse_mul() {
    NodePtr n = parse_unary();
    while (true) {
      std::string op;
      for (const char* o : {"*", "/", "%"})
        if (accept(o)) {
          op = o;
          break;
        }
      if (op.empty()) return n;
      n = make(Node::Kind::kBinary, n, parse_unary(), op);
    }
  }
  NodePtr parse_unary() {
    // Bounds the recursion so that a hostile text cannot overflow the stack.
    if (++depth_ > kMaxDepth) fail("nested too deeply");
    NodePtr n;
    if (accept("-"))
      n = make(Node::Kind::kNegate, parse_unary());
    else if (accept("!"))
      n = make(Node::Kind::kNot, parse_unary());
    else
      n = parse_primary();
    --depth_;
    return n;
  }
  NodePtr parse_primary() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    if (accept("(")) {
      NodePtr n = parse_or();
      expect(")");
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos_;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      auto n = std::make_shared<Node>();
      auto [p, ec] = std::from_chars(text_.data() + pos_, text_.data() + end, n->value);
      if (ec != std::errc()) fail("literal out of int64 range");
      pos_ = end;
      if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        fail("unexpected '" + std::string(1, text_[pos_]) + "'");
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      std::string name(text_.substr(pos_, end - pos_));
      pos_ = end;
      if ((name == "min" || name == "max") && accept("(")) {
        NodePtr a = parse_or();
        expect(",");
        NodePtr b = parse_or();
        expect(")");
        return make(name == "min" ? Node::Kind::kMin : Node::Kind::kMax, a, b);
      }
      if (accept("(")) fail("unknown function '" + name + "' (functions: min, max)");
      return make(Node::Kind::kIdentifier, nullptr, nullptr, name);
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  static constexpr int kMaxDepth = 200;
  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

using Op = Expression::Bound::Op;

Op::Code binary_code(const std::string& spelling) {
  static const std::map<std::string, Op::Code> codes = {
      {"&&", Op::Code::kAnd}, {"||", Op::Code::kOr}, {"+", Op::Code::kAdd}, {"-", Op::Code::kSub},
      {"*", Op::Code::kMul},  {"/", Op::Code::kDiv}, {"%", Op::Code::kMod}, {"<", Op::Code::kLt},
      {"<=", Op::Code::kLe},  {">", Op::Code::kGt},  {">=", Op::Code::kGe}, {"==", Op::Code::kEq},
      {"!=", Op::Code::kNe}};
  const auto it = codes.find(spelling);
  if (it == codes.end()) throw InputError("unknown operator '" + spelling + "'");
  return it->second;
}

// The arithmetic both evaluators share, on evaluated operands (&&, || and unary ops aside, which
// decide what to evaluate): overflow and division by zero are InputErrors naming the expression.
int64_t apply(Op::Code code, int64_t a, int64_t b, const std::string& text) {
  auto fail = [&](const char* why) { throw InputError(std::string(why) + " in '" + text + "'"); };
  using C = Op::Code;
  int64_t r = 0;
  switch (code) {
    case C::kMin: return std::min(a, b);
    case C::kMax: return std::max(a, b);
    case C::kAdd:
      if (__builtin_add_overflow(a, b, &r)) fail("integer overflow");
      return r;
    case C::kSub:
      if (__builtin_sub_overflow(a, b, &r)) fail("integer overflow");
      return r;
    case C::kMul:
      if (__builtin_mul_overflow(a, b, &r)) fail("integer overflow");
      return r;
    case C::kDiv:
    case C::kMod:
      if (b == 0) fail("division by zero");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) fail("integer overflow");
      return code == C::kDiv ? a / b : a % b;
    case C::kLt: return a < b;
    case C::kLe: return a <= b;
    case C::kGt: return a > b;
    case C::kGe: return a >= b;
    case C::kEq: return a == b;
    case C::kNe: return a != b;
    default:
      fail("corrupt expression");
  }
  return 0;
}

class Evaluator {
 public:
  Evaluator(const std::string& text, const std::map<std::string, int64_t>& vars)
      : text_(text), vars_(vars) {}

  int64_t eval(const Node& n) const {
    switch (n.kind) {
      case Node::Kind::kLiteral:
        return n.value;
      case Node::Kind::kIdentifier: {
        auto it = vars_.find(n.name);
        if (it == vars_.end()) fail("unknown identifier '" + n.name + "'");
        return it->second;
      }
      case Node::Kind::kNegate: {
        int64_t v = eval(*n.lhs), r = 0;
        if (__builtin_sub_overflow(int64_t{0}, v, &r)) fail("integer overflow");
        return r;
      }
      case Node::Kind::kNot:
        return eval(*n.lhs) == 0 ? 1 : 0;
      case Node::Kind::kMin:
        return std::min(eval(*n.lhs), eval(*n.rhs));
      case Node::Kind::kMax:
        return std::max(eval(*n.lhs), eval(*n.rhs));
      case Node::Kind::kBinary:
        return binary(n);
    }
    fail("corrupt expression tree");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(why + " in '" + text_ + "'");
  }

  int64_t binary(const Node& n) const {
    const std::string& op = n.name;
    // Short-circuit so that "X != 0 && Y / X > 2" is safe, as in C++.
    if (op == "&&") return eval(*n.lhs) != 0 && eval(*n.rhs) != 0 ? 1 : 0;
    if (op == "||") return eval(*n.lhs) != 0 || eval(*n.rhs) != 0 ? 1 : 0;
    const int64_t a = eval(*n.lhs), b = eval(*n.rhs);
    return apply(binary_code(op), a, b, text_);
  }

  const std::string& text_;
  const std::map<std::string, int64_t>& vars_;
};

void collect(const Node* n, std::set<std::string>& out) {
  if (!n) return;
  if (n->kind == Node::Kind::kIdentifier) out.insert(n->name);
  collect(n->lhs.get(), out);
  collect(n->rhs.get(), out);
}

// Binding strength of a binary operator, as in C++ (higher binds tighter).
int precedence(const std::string& op) {
  if (op == "||") return 1;
  if (op == "&&") return 2;
  if (op == "==" || op == "!=") return 3;
  if (op == "<" || op == "<=" || op == ">" || op == ">=") return 4;
  if (op == "+" || op == "-") return 5;
  return 6;  // * / %
}
constexpr int kUnaryPrecedence = 7;

// C++ source of n where the context binds as tightly as `context`: parenthesised where n binds
// looser. An && under || is parenthesised too, as compilers advise.
std::string cxx(const Node& n, int context) {
  std::string s;
  int own = kUnaryPrecedence;
  switch (n.kind) {
    case Node::Kind::kLiteral:
      return std::to_string(n.value) + "LL";  // 64-bit, as eval() computes
    case Node::Kind::kIdentifier:
      return n.name;
    case Node::Kind::kMin:
    case Node::Kind::kMax:
      return std::string(n.kind == Node::Kind::kMin ? "evo_min(" : "evo_max(") + cxx(*n.lhs, 0) + ", " +
             cxx(*n.rhs, 0) + ")";
    case Node::Kind::kNegate:
    case Node::Kind::kNot: {
      std::string operand = cxx(*n.lhs, kUnaryPrecedence);
      if (operand[0] == '-' || operand[0] == '!') operand = "(" + operand + ")";  // never "--"
      s = (n.kind == Node::Kind::kNegate ? "-" : "!") + operand;
      break;
    }
    case Node::Kind::kBinary: {
      own = precedence(n.name);
      auto side = [&](const Node& child, int child_context) {
        std::string t = cxx(child, child_context);
        const bool and_under_or = n.name == "||" && child.kind == Node::Kind::kBinary && child.name == "&&";
        return and_under_or ? "(" + t + ")" : t;
      };
      // Left-associative: a right operand of the same strength keeps its parentheses.
      s = side(*n.lhs, own) + " " + n.name + " " + side(*n.rhs, own + 1);
      break;
    }
  }
  return own < context ? "(" + s + ")" : s;
}

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.text_ = std::string(text);
  e.root_ = Parser(e.text_).parse_all();
  return e;
}

namespace {

// Appends n's operations in post-order and returns the index of n's own.
int flatten(const Node& n, const std::function<size_t(const std::string&)>& slot_of, std::vector<Op>& out) {
  Op op;
  switch (n.kind) {
    case Node::Kind::kLiteral:
      op.value = n.value;
      break;
    case Node::Kind::kIdentifier:
      op.code = Op::Code::kSlot;
      op.value = static_cast<int64_t>(slot_of(n.name));
      break;
    case Node::Kind::kNegate:
    case Node::Kind::kNot:
      op.code = n.kind == Node::Kind::kNegate ? Op::Code::kNegate : Op::Code::kNot;
      op.lhs = flatten(*n.lhs, slot_of, out);
      break;
    case Node::Kind::kMin:
    case Node::Kind::kMax:
    case Node::Kind::kBinary:
      op.code = n.kind == Node::Kind::kMin ? Op::Code::kMin : n.kind == Node::Kind::kMax ? Op::Code::kMax
                                                                                            : binary_code(n.name);
      op.lhs = flatten(*n.lhs, slot_of, out);
      op.rhs = flatten(*n.rhs, slot_of, out);
      break;
  }
  out.push_back(op);
  return static_cast<int>(out.size()) - 1;
}

class BoundEvaluator {
 public:
  BoundEvaluator(const std::string& text, const std::vector<Op>& ops, const int64_t* values)
      : text_(text), ops_(ops), values_(values) {}

  int64_t eval(int i) const {
    const Op& op = ops_[static_cast<size_t>(i)];
    using C = Op::Code;
    switch (op.code) {
      case C::kLiteral:
        return op.value;
      case C::kSlot:
        return values_[op.value];
      case C::kNot:
        return eval(op.lhs) == 0 ? 1 : 0;
      case C::kAnd:  // short-circuit, as the map's eval and C++
        return eval(op.lhs) != 0 && eval(op.rhs) != 0 ? 1 : 0;
      case C::kOr:
        return eval(op.lhs) != 0 || eval(op.rhs) != 0 ? 1 : 0;
      default:
        break;
    }
    int64_t r = 0;
    if (op.code == C::kNegate) {
      if (__builtin_sub_overflow(int64_t{0}, eval(op.lhs), &r)) fail("integer overflow");
      return r;
    }
    return apply(op.code, eval(op.lhs), eval(op.rhs), text_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw InputError(why + " in '" + text_ + "'"); }

  const std::string& text_;
  const std::vector<Op>& ops_;
  const int64_t* values_;
};

}  // namespace

Expression::Bound Expression::bind(const std::function<size_t(const std::string&)>& slot_of) const {
  if (!root_) throw InputError("binding an empty expression");
  auto ops = std::make_shared<std::vector<Bound::Op>>();
  flatten(*root_, slot_of, *ops);
  Bound b;
  b.text_ = text_;
  b.ops_ = std::move(ops);
  return b;
}

int64_t Expression::Bound::eval(const int64_t* values) const {
  if (!ops_ || ops_->empty()) throw InputError("evaluating an empty expression");
  return BoundEvaluator(text_, *ops_, values).eval(static_cast<int>(ops_->size()) - 1);
}

int64_t Expression::eval(const std::map<std::string, int64_t>& vars) const {
  if (!root_) throw InputError("evaluating an empty expression");
  return Evaluator(text_, vars).eval(*root_);
}

std::set<std::string> Expression::identifiers() const {
  std::set<std::string> out;
  collect(root_.get(), out);
  return out;
}

std::string Expression::cxx() const {
  if (!root_) throw InputError("emitting an empty expression");
  return evo::cxx(*root_, 0);
}

}  // namespace evo
