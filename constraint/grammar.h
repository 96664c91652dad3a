// The one grammar form every constraint is parsed into: named rules whose
// bodies are expression trees over UTF-8 literals, code-point classes, rule
// references, sequences, alternatives and bounded repetition. GBNF text, a
// regular expression, a JSON schema (through GBNF), json_object and choice all
// become a Grammar, which the automaton builder turns into byte automata.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::constraint {

// An inclusive range of Unicode code points.
struct CodepointRange {
  char32_t lo = 0;
  char32_t hi = 0;
};

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;
inline constexpr int32_t kUnbounded = -1;  // Repeat::max without a bound
// The largest bound of a repetition ({m,n}, maxLength, maxItems).
inline constexpr int32_t kMaxRepetition = 10000;

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,     // matches ""
    kLiteral,   // text: UTF-8 bytes, matched exactly
    kClass,     // ranges (sorted, disjoint), negated: any code point outside them
    kRuleRef,   // rule: an index into Grammar::rules
    kSequence,  // children, one after the other
    kChoice,    // children, any one of them
    kRepeat,    // children[0], min..max times (max kUnbounded: no bound)
  };
  Kind kind = Kind::kEmpty;
  std::string text;
  std::vector<CodepointRange> ranges;
  bool negated = false;
  int32_t rule = -1;
  std::vector<int32_t> children;  // indices into Grammar::exprs
  int32_t min = 0;
  int32_t max = 0;
};

struct Rule {
  std::string name;
  int32_t body = -1;  // index into Grammar::exprs; -1 while only referenced
};

struct Grammar {
  std::vector<Expr> exprs;
  std::vector<Rule> rules;
  int32_t root = -1;  // the rule the whole output must match

  int32_t Add(Expr expr) {
    exprs.push_back(std::move(expr));
    return static_cast<int32_t>(exprs.size()) - 1;
  }
  int32_t AddLiteral(std::string text) {
    Expr e;
    e.kind = Expr::Kind::kLiteral;
    e.text = std::move(text);
    return Add(std::move(e));
  }
  int32_t AddClass(std::vector<CodepointRange> ranges, bool negated) {
    Expr e;
    e.kind = Expr::Kind::kClass;
    e.ranges = std::move(ranges);
    e.negated = negated;
    return Add(std::move(e));
  }
  int32_t AddRuleRef(int32_t rule) {
    Expr e;
    e.kind = Expr::Kind::kRuleRef;
    e.rule = rule;
    return Add(std::move(e));
  }
  int32_t AddList(Expr::Kind kind, std::vector<int32_t> children) {
    if (children.size() == 1) return children[0];
    Expr e;
    e.kind = children.empty() ? Expr::Kind::kEmpty : kind;
    e.children = std::move(children);
    return Add(std::move(e));
  }
  int32_t AddRepeat(int32_t child, int32_t min, int32_t max) {
    Expr e;
    e.kind = Expr::Kind::kRepeat;
    e.children = {child};
    e.min = min;
    e.max = max;
    return Add(std::move(e));
  }
};

// Sorts and merges overlapping or adjacent ranges.
std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges);

}  // namespace loom::constraint
