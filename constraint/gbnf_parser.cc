#include "constraint/gbnf_parser.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace loom::constraint {
namespace {

// Parentheses nested deeper than this are refused, so that hostile input
// cannot exhaust the stack of the recursive descent.
constexpr int kMaxNesting = 128;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Parse(std::string_view root) {
    SkipSpace(/*newlines=*/true);
    while (!AtEnd()) {
      if (!ParseRule()) return status_;
      SkipSpace(/*newlines=*/true);
    }
    for (size_t i = 0; i < grammar_.rules.size(); ++i) {
      if (grammar_.rules[i].body < 0) {
        pos_ = first_use_[i];
        Fail(absl::StrCat("undefined rule \"", grammar_.rules[i].name, "\""));
        return status_;
      }
    }
    auto it = rule_ids_.find(std::string(root));
    if (it == rule_ids_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no rule named \"", std::string(root), "\""));
    }
    grammar_.root = it->second;
    return std::move(grammar_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  // Records the error at pos_; returns -1 (no expression) for the callers.
  int32_t Fail(const std::string& problem) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    status_ = absl::InvalidArgumentError(absl::StrCat("line ", line, " col ", col, ": ", problem));
    return -1;
  }
  bool Refuse(const std::string& problem) {
    Fail(problem);
    return false;
  }

  // Spaces, tabs, comments and (when `newlines`) line breaks.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  int32_t RuleId(std::string_view name) {
    auto [it, inserted] = rule_ids_.try_emplace(std::string(name), grammar_.rules.size());
    if (inserted) {
      grammar_.rules.push_back(Rule{std::string(name), -1});
      first_use_.push_back(pos_);
    }
    return it->second;
  }

  std::string_view ParseName() {
    const size_t begin = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }

  bool ParseRule() {
    const size_t name_pos = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) return Refuse("expected a rule name");
    SkipSpace(/*newlines=*/false);
    if (text_.substr(pos_, 3) != "::=") return Refuse("expected \"::=\" after the rule name");
    pos_ += 3;
    const int32_t id = RuleId(name);
    if (grammar_.rules[id].body >= 0) {
      pos_ = name_pos;
      return Refuse(absl::StrCat("rule \"", std::string(name), "\" is defined twice"));
    }
    SkipSpace(/*newlines=*/true);
    const int32_t body = ParseAlternatives(0);
    if (body < 0) return false;
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') {
      return Refuse(absl::StrCat("unexpected '", std::string(1, Peek()), "'"));
    }
    grammar_.rules[id].body = body;
    return true;
  }

  // Alternatives up to the end of the rule (depth 0) or the closing
  // parenthesis; -1 on error.
  int32_t ParseAlternatives(int depth) {
    if (depth > kMaxNesting) return Fail("parentheses nested too deeply");
    std::vector<int32_t> alternatives;
    while (true) {
      const int32_t seq = ParseSequence(depth);
      if (seq < 0) return -1;
      alternatives.push_back(seq);
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace(/*newlines=*/true);
    }
    return grammar_.AddList(Expr::Kind::kChoice, std::move(alternatives));
  }

  int32_t ParseSequence(int depth) {
    std::vector<int32_t> items;
    while (true) {
      SkipSpace(/*newlines=*/depth > 0);
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
      int32_t item = ParsePrimary(depth);
      if (item < 0) return -1;
      item = ParsePostfix(item);
      if (item < 0) return -1;
      items.push_back(item);
    }
    return grammar_.AddList(Expr::Kind::kSequence, std::move(items));
  }

  int32_t ParsePrimary(int depth) {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return grammar_.AddClass({}, /*negated=*/true);
    }
    if (c == '(') {
      ++pos_;
      SkipSpace(/*newlines=*/true);
      const int32_t inner = ParseAlternatives(depth + 1);
      if (inner < 0) return -1;
      SkipSpace(/*newlines=*/true);
      if (Peek() != ')') return Fail("expected ')'");
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) {
      const size_t name_pos = pos_;
      const std::string_view name = ParseName();
      const size_t after = pos_;
      SkipSpace(/*newlines=*/false);
      const bool defines = text_.substr(pos_, 3) == "::=";
      pos_ = name_pos;  // where a reference to an undefined rule is reported
      if (defines) return Fail("expected a newline before the next rule");
      const int32_t rule = RuleId(name);
      pos_ = after;
      return grammar_.AddRuleRef(rule);
    }
    return Fail(absl::StrCat("unexpected '", std::string(1, c), "'"));
  }

  int32_t ParsePostfix(int32_t item) {
    while (true) {
      const char c = Peek();
      if (c == '*') {
        ++pos_;
        item = grammar_.AddRepeat(item, 0, kUnbounded);
      } else if (c == '+') {
        ++pos_;
        item = grammar_.AddRepeat(item, 1, kUnbounded);
      } else if (c == '?') {
        ++pos_;
        item = grammar_.AddRepeat(item, 0, 1);
      } else if (c == '{') {
        int32_t min = 0, max = 0;
        if (!ParseBraces(min, max)) return -1;
        item = grammar_.AddRepeat(item, min, max);
      } else {
        return item;
      }
    }
  }

  bool ParseNumber(int32_t& value) {
    const size_t begin = pos_;
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepetition) {
        pos_ = begin;
        return Refuse(absl::StrCat("repetition bound above ", kMaxRepetition));
      }
      ++pos_;
    }
    if (pos_ == begin) return Refuse("expected a number");
    value = static_cast<int32_t>(v);
    return true;
  }

  // {m}, {m,} or {m,n}.
  bool ParseBraces(int32_t& min, int32_t& max) {
    ++pos_;
    SkipSpace(/*newlines=*/false);
    if (!ParseNumber(min)) return false;
    SkipSpace(/*newlines=*/false);
    max = min;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(/*newlines=*/false);
      max = kUnbounded;
      if (Peek() != '}' && !ParseNumber(max)) return false;
      SkipSpace(/*newlines=*/false);
    }
    if (Peek() != '}') return Refuse("expected '}'");
    if (max != kUnbounded && max < min) return Refuse("repetition {m,n} with n < m");
    ++pos_;
    return true;
  }

  // One character of a literal or class, escapes decoded; false on error.
  bool ParseChar(char32_t& out) {
    if (AtEnd()) return Refuse("unexpected end of text");
    if (Peek() != '\\') {
      const size_t len = Utf8CharLength(text_, pos_);
      out = DecodeUtf8(text_.substr(pos_, len));
      pos_ += len;
      return true;
    }
    const size_t escape_pos = pos_;
    ++pos_;
    const char e = Peek();
    ++pos_;
    int digits = 0;
    switch (e) {
      case 'n':
        out = '\n';
        return true;
      case 'r':
        out = '\r';
        return true;
      case 't':
        out = '\t';
        return true;
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        out = static_cast<unsigned char>(e);
        return true;
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      default:
        pos_ = escape_pos;
        return Refuse("unknown escape");
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0) return Refuse("expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > kMaxCodepoint) {
      pos_ = escape_pos;
      return Refuse("code point above U+10FFFF");
    }
    out = v;
    return true;
  }

  int32_t ParseLiteral() {
    ++pos_;
    std::string text;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Fail("unterminated string literal");
      if (Peek() == '"') break;
      char32_t c = 0;
      if (!ParseChar(c)) return -1;
      text += EncodeUtf8(c);
    }
    ++pos_;
    if (text.empty()) return grammar_.AddList(Expr::Kind::kSequence, {});
    return grammar_.AddLiteral(std::move(text));
  }

  int32_t ParseClass() {
    const size_t begin = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (AtEnd() || Peek() == '\n') {
        pos_ = begin;
        return Fail("unterminated character class");
      }
      if (Peek() == ']') break;
      char32_t lo = 0, hi = 0;
      if (!ParseChar(lo)) return -1;
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']') {
        ++pos_;
        if (!ParseChar(hi)) return -1;
        if (hi < lo) return Fail("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty() && !negated) {
      pos_ = begin;
      return Fail("empty character class");
    }
    return grammar_.AddClass(NormalizeRanges(std::move(ranges)), negated);
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  absl::flat_hash_map<std::string, int32_t> rule_ids_;
  std::vector<size_t> first_use_;  // per rule: where it was first named
  absl::Status status_;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).Parse(root);
}

}  // namespace loom::constraint
