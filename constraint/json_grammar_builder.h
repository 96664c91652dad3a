// Building blocks of JSON grammars: expression helpers over a Grammar and the
// shared rules of JSON's lexical parts (whitespace, strings, numbers, any
// value), created on first use under one name prefix.
//
// Whitespace is bounded, so that no model can pad forever: after { [ and ,
// and before } ] one space or tab, or a newline and up to kMaxIndent spaces
// or tabs; after : at most one space; nothing before : and ,. That admits
// compact JSON and the usual indented forms (json.dumps with and without
// indent).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constraint/grammar.h"

namespace loom::constraint {

inline constexpr int32_t kMaxIndent = 24;
// Digits of an integer part or a fraction, so that a model cannot extend a
// number forever.
inline constexpr int32_t kMaxDigits = 16;

class JsonGrammarBuilder {
 public:
  // Rules are named `prefix` (the first NewRule("")) and `prefix-<suffix>`.
  JsonGrammarBuilder(Grammar& grammar, std::string prefix);

  Grammar& grammar() { return g_; }

  int32_t Lit(std::string_view text) { return g_.AddLiteral(std::string(text)); }
  int32_t Seq(std::vector<int32_t> items) {
    return g_.AddList(Expr::Kind::kSequence, std::move(items));
  }
  int32_t Alt(std::vector<int32_t> items) {
    return g_.AddList(Expr::Kind::kChoice, std::move(items));
  }
  int32_t Repeat(int32_t e, int32_t min, int32_t max) { return g_.AddRepeat(e, min, max); }
  int32_t Opt(int32_t e) { return Repeat(e, 0, 1); }
  int32_t Class(std::vector<CodepointRange> ranges, bool negated = false) {
    return g_.AddClass(NormalizeRanges(std::move(ranges)), negated);
  }
  // An expression that matches nothing.
  int32_t Nothing() { return g_.AddClass({}, false); }

  // A new rule named after the prefix and `suffix` (made unique); its body is
  // set later with SetBody.
  int32_t NewRule(std::string_view suffix);
  void SetBody(int32_t rule, int32_t body) { g_.rules[rule].body = body; }
  int32_t Ref(int32_t rule) { return g_.AddRuleRef(rule); }

  // Whitespace between structural tokens (see above) and after a colon.
  int32_t Ws();
  int32_t ColonWs();

  // One JSON string character: unescaped (not ", \ or a control character)
  // or an escape sequence.
  int32_t StringChar();
  // A JSON string with minLength..maxLength characters (max kUnbounded).
  int32_t String(int32_t min_length, int32_t max_length);
  int32_t Number();
  // An integer in [lo, hi], clamped to integers of at most kMaxDigits digits.
  int32_t Integer(int64_t lo, int64_t hi);
  static constexpr int64_t kMaxInteger = 9999999999999999;  // kMaxDigits nines
  int32_t Boolean() { return Alt({Lit("true"), Lit("false")}); }
  int32_t Null() { return Lit("null"); }
  // Any JSON value, object or array.
  int32_t AnyValue();
  int32_t AnyObject();
  int32_t AnyArray();

  // "{" ... "}" and "[" ... "]" around members separated by commas.
  int32_t ObjectOf(int32_t key, int32_t value);
  int32_t ArrayOf(int32_t item, int32_t min_items, int32_t max_items);

 private:
  int32_t Shared(int32_t& rule, std::string_view suffix, int32_t (JsonGrammarBuilder::*body)());
  int32_t WsBody();
  int32_t StringBody() { return StringExpr(0, kUnbounded); }
  int32_t StringExpr(int32_t min_length, int32_t max_length);
  int32_t ValueBody();
  int32_t ObjectBody() { return ObjectOf(Ref(string_rule()), AnyValue()); }
  int32_t ArrayBody() { return ArrayOf(AnyValue(), 0, kUnbounded); }
  int32_t string_rule();
  // Non-negative integers in [lo, hi] (hi < 0: no bound), no leading zeros.
  int32_t Digits(int64_t lo, int64_t hi);
  // Decimal strings of equal length, lo <= x <= hi digit-wise.
  int32_t SameLength(const std::string& lo, const std::string& hi);

  Grammar& g_;
  std::string prefix_;
  int32_t ws_ = -1;
  int32_t string_ = -1;
  int32_t value_ = -1;
  int32_t object_ = -1;
  int32_t array_ = -1;
};

}  // namespace loom::constraint
