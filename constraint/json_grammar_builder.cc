#include "constraint/json_grammar_builder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace loom::constraint {
namespace {

constexpr int32_t kMaxExponentDigits = 3;

int64_t MaxWithDigits(int32_t n) {
  int64_t v = 1;
  for (int32_t i = 0; i < n; ++i) v *= 10;
  return v - 1;
}

}  // namespace

JsonGrammarBuilder::JsonGrammarBuilder(Grammar& grammar, std::string prefix)
    : g_(grammar), prefix_(std::move(prefix)) {}

int32_t JsonGrammarBuilder::NewRule(std::string_view suffix) {
  std::string base = suffix.empty() ? prefix_ : absl::StrCat(prefix_, "-", std::string(suffix));
  std::string name = base;
  for (int n = 2;; ++n) {
    const bool taken = std::any_of(g_.rules.begin(), g_.rules.end(),
                                   [&](const Rule& r) { return r.name == name; });
    if (!taken) break;
    name = absl::StrCat(base, "-", n);
  }
  g_.rules.push_back(Rule{std::move(name), -1});
  return static_cast<int32_t>(g_.rules.size()) - 1;
}

int32_t JsonGrammarBuilder::Shared(int32_t& rule, std::string_view suffix,
                                   int32_t (JsonGrammarBuilder::*body)()) {
  if (rule < 0) {
    rule = NewRule(suffix);
    SetBody(rule, (this->*body)());
  }
  return Ref(rule);
}

int32_t JsonGrammarBuilder::Ws() { return Shared(ws_, "ws", &JsonGrammarBuilder::WsBody); }

int32_t JsonGrammarBuilder::WsBody() {
  const int32_t blank = Class({{'\t', '\t'}, {' ', ' '}});
  return Opt(Alt({blank, Seq({Lit("\n"), Repeat(blank, 0, kMaxIndent)})}));
}

int32_t JsonGrammarBuilder::ColonWs() { return Seq({Lit(":"), Opt(Lit(" "))}); }

int32_t JsonGrammarBuilder::StringChar() {
  const int32_t plain = Class({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, /*negated=*/true);
  const int32_t hex = Class({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
  const int32_t escape = Seq({Lit("\\"), Alt({Class({{'"', '"'},
                                                     {'\\', '\\'},
                                                     {'/', '/'},
                                                     {'b', 'b'},
                                                     {'f', 'f'},
                                                     {'n', 'n'},
                                                     {'r', 'r'},
                                                     {'t', 't'}}),
                                              Seq({Lit("u"), Repeat(hex, 4, 4)})})});
  return Alt({plain, escape});
}

int32_t JsonGrammarBuilder::string_rule() {
  Shared(string_, "string", &JsonGrammarBuilder::StringBody);
  return string_;
}

int32_t JsonGrammarBuilder::String(int32_t min_length, int32_t max_length) {
  if (min_length == 0 && max_length == kUnbounded) return Ref(string_rule());
  return StringExpr(min_length, max_length);
}

int32_t JsonGrammarBuilder::StringExpr(int32_t min_length, int32_t max_length) {
  return Seq({Lit("\""), Repeat(StringChar(), min_length, max_length), Lit("\"")});
}

int32_t JsonGrammarBuilder::Number() {
  const int32_t digit = Class({{'0', '9'}});
  const int32_t integral =
      Alt({Lit("0"), Seq({Class({{'1', '9'}}), Repeat(digit, 0, kMaxDigits - 1)})});
  const int32_t fraction = Seq({Lit("."), Repeat(digit, 1, kMaxDigits)});
  const int32_t exponent =
      Seq({Class({{'E', 'E'}, {'e', 'e'}}), Opt(Class({{'+', '+'}, {'-', '-'}})),
           Repeat(digit, 1, kMaxExponentDigits)});
  return Seq({Opt(Lit("-")), integral, Opt(fraction), Opt(exponent)});
}

int32_t JsonGrammarBuilder::Integer(int64_t lo, int64_t hi) {
  lo = std::max(lo, -kMaxInteger);
  hi = std::min(hi, kMaxInteger);
  if (lo == -kMaxInteger && hi == kMaxInteger) {
    return Seq({Opt(Lit("-")),
                Alt({Lit("0"),
                     Seq({Class({{'1', '9'}}), Repeat(Class({{'0', '9'}}), 0, kMaxDigits - 1)})})});
  }
  std::vector<int32_t> parts;
  // Negative values: "-" and the magnitudes in [max(1, -hi), -lo].
  if (lo < 0) {
    const int64_t mag_lo = std::max<int64_t>(1, hi < 0 ? -hi : 1);
    if (mag_lo <= -lo) parts.push_back(Seq({Lit("-"), Digits(mag_lo, -lo)}));
  }
  const int64_t from = std::max<int64_t>(lo, 0);
  if (from <= hi) parts.push_back(Digits(from, hi));
  return parts.empty() ? Nothing() : Alt(std::move(parts));
}

int32_t JsonGrammarBuilder::Digits(int64_t lo, int64_t hi) {
  if (lo <= 1 && hi == kMaxInteger) {
    // Every length up to kMaxDigits: one loop instead of an alternative per length.
    const int32_t tail = Seq({Class({{'1', '9'}}), Repeat(Class({{'0', '9'}}), 0, kMaxDigits - 1)});
    return lo == 0 ? Alt({Lit("0"), tail}) : tail;
  }
  std::vector<int32_t> lengths;
  const std::string lo_s = std::to_string(lo), hi_s = std::to_string(hi);
  for (size_t n = lo_s.size(); n <= hi_s.size(); ++n) {
    const int64_t first = n == 1 ? 0 : MaxWithDigits(static_cast<int32_t>(n) - 1) + 1;
    const int64_t a = std::max(lo, first);
    const int64_t b = std::min(hi, MaxWithDigits(static_cast<int32_t>(n)));
    if (a <= b) lengths.push_back(SameLength(std::to_string(a), std::to_string(b)));
  }
  return Alt(std::move(lengths));
}

int32_t JsonGrammarBuilder::SameLength(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 1) return Class({{static_cast<char32_t>(lo[0]), static_cast<char32_t>(hi[0])}});
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return Seq({Lit(lo.substr(0, 1)), SameLength(lo_rest, hi_rest)});
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  const int32_t any_rest =
      Repeat(Class({{'0', '9'}}), static_cast<int32_t>(n - 1), static_cast<int32_t>(n - 1));
  std::vector<int32_t> alts;
  char first = lo[0], last = hi[0];
  if (lo_rest != zeros) {
    alts.push_back(Seq({Lit(lo.substr(0, 1)), SameLength(lo_rest, nines)}));
    ++first;
  }
  int32_t tail = -1;
  if (hi_rest != nines) {
    tail = Seq({Lit(hi.substr(0, 1)), SameLength(zeros, hi_rest)});
    --last;
  }
  if (first <= last) {
    alts.push_back(
        Seq({Class({{static_cast<char32_t>(first), static_cast<char32_t>(last)}}), any_rest}));
  }
  if (tail >= 0) alts.push_back(tail);
  return Alt(std::move(alts));
}

int32_t JsonGrammarBuilder::AnyValue() {
  return Shared(value_, "value", &JsonGrammarBuilder::ValueBody);
}

int32_t JsonGrammarBuilder::ValueBody() {
  return Alt({AnyObject(), AnyArray(), Ref(string_rule()), Number(), Boolean(), Null()});
}

int32_t JsonGrammarBuilder::AnyObject() {
  return Shared(object_, "object", &JsonGrammarBuilder::ObjectBody);
}

int32_t JsonGrammarBuilder::AnyArray() {
  return Shared(array_, "array", &JsonGrammarBuilder::ArrayBody);
}

int32_t JsonGrammarBuilder::ObjectOf(int32_t key, int32_t value) {
  const int32_t member = Seq({key, ColonWs(), value});
  const int32_t more = Repeat(Seq({Lit(","), Ws(), member}), 0, kUnbounded);
  return Seq({Lit("{"), Ws(), Opt(Seq({member, more, Ws()})), Lit("}")});
}

int32_t JsonGrammarBuilder::ArrayOf(int32_t item, int32_t min_items, int32_t max_items) {
  if (max_items == 0) return Seq({Lit("["), Ws(), Lit("]")});
  const int32_t more = Repeat(Seq({Lit(","), Ws(), item}), std::max(min_items - 1, 0),
                              max_items == kUnbounded ? kUnbounded : max_items - 1);
  const int32_t items = Seq({item, more, Ws()});
  return Seq({Lit("["), Ws(), min_items > 0 ? items : Opt(items), Lit("]")});
}

}  // namespace loom::constraint
