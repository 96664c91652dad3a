#include "constraint/gbnf_printer.h"

#include "absl/strings/str_format.h"
#include "constraint/json_schema_to_grammar.h"

namespace loom::constraint {
namespace {

std::string ClassChar(char32_t c) {
  switch (c) {
    case '\\':
      return "\\\\";
    case ']':
      return "\\]";
    case '[':
      return "\\[";
    case '-':
      return "\\-";
    case '^':
      return "\\^";
    case '"':
      return "\\\"";
    default:
      break;
  }
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F)) return absl::StrFormat("\\x%02X", c);
  if (c > 0xFFFF) return absl::StrFormat("\\U%08X", c);
  if (c > 0x7F) return absl::StrFormat("\\u%04X", c);
  return std::string(1, static_cast<char>(c));
}

std::string Parenthesize(const std::string& s) {
  std::string out = "(";
  out += s;
  out += ')';
  return out;
}

class Printer {
 public:
  explicit Printer(const Grammar& g) : g_(g) {}

  // `nested`: inside a sequence or under a postfix operator, where an
  // alternative or a sequence needs parentheses.
  std::string Print(int32_t e, bool nested) const {
    const Expr& x = g_.exprs[e];
    switch (x.kind) {
      case Expr::Kind::kEmpty:
        return "\"\"";
      case Expr::Kind::kLiteral:
        return GbnfQuote(x.text);
      case Expr::Kind::kClass: {
        std::string out = x.negated ? "[^" : "[";
        for (const CodepointRange& r : x.ranges) {
          out += ClassChar(r.lo);
          if (r.hi != r.lo) {
            out += '-';
            out += ClassChar(r.hi);
          }
        }
        // An empty non-negated class matches nothing; GBNF has no such
        // class, so it prints as one that no text can satisfy.
        if (x.ranges.empty() && !x.negated) return "[^\\x00-\\U0010FFFF]";
        out += ']';
        return out;
      }
      case Expr::Kind::kRuleRef:
        return g_.rules[x.rule].name;
      case Expr::Kind::kSequence: {
        std::string out;
        for (int32_t c : x.children) {
          if (!out.empty()) out += ' ';
          out += Print(c, true);
        }
        return nested ? Parenthesize(out) : out;
      }
      case Expr::Kind::kChoice: {
        std::string out;
        for (int32_t c : x.children) {
          if (!out.empty()) out += " | ";
          out += Print(c, false);
        }
        return nested ? Parenthesize(out) : out;
      }
      case Expr::Kind::kRepeat: {
        std::string out = Print(x.children[0], true);
        if (x.min == 0 && x.max == kUnbounded) return out + "*";
        if (x.min == 1 && x.max == kUnbounded) return out + "+";
        if (x.min == 0 && x.max == 1) return out + "?";
        if (x.max == kUnbounded) return absl::StrFormat("%s{%d,}", out, x.min);
        if (x.max == x.min) return absl::StrFormat("%s{%d}", out, x.min);
        return absl::StrFormat("%s{%d,%d}", out, x.min, x.max);
      }
    }
    return "\"\"";
  }

 private:
  const Grammar& g_;
};

}  // namespace

std::string PrintGbnf(const Grammar& grammar) {
  const Printer printer(grammar);
  std::string out;
  auto print_rule = [&](int32_t r) {
    const Rule& rule = grammar.rules[r];
    if (rule.body < 0) return;
    out += rule.name;
    out += " ::= ";
    out += printer.Print(rule.body, false);
    out += '\n';
  };
  print_rule(grammar.root);
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    if (static_cast<int32_t>(r) != grammar.root) print_rule(static_cast<int32_t>(r));
  }
  return out;
}

}  // namespace loom::constraint
