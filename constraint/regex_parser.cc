#include "constraint/regex_parser.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "constraint/gbnf_parser.h"
#include "constraint/utf8_ranges.h"

namespace loom::constraint {
namespace {

constexpr int kMaxNesting = 128;

const std::vector<CodepointRange>& DigitRanges() {
  static const auto* r = new std::vector<CodepointRange>{{'0', '9'}};
  return *r;
}
const std::vector<CodepointRange>& WordRanges() {
  static const auto* r =
      new std::vector<CodepointRange>{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return *r;
}
const std::vector<CodepointRange>& SpaceRanges() {
  static const auto* r = new std::vector<CodepointRange>{{'\t', '\r'}, {' ', ' '}};
  return *r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, Grammar& grammar) : p_(pattern), g_(grammar) {}

  absl::StatusOr<RegexParse> Parse() {
    RegexParse out;
    if (Peek() == '^') {
      out.anchored_start = true;
      ++pos_;
    }
    out.expr = ParseAlternatives(0);
    if (out.expr < 0) return status_;
    if (Peek() == '$') {
      out.anchored_end = true;
      ++pos_;
    }
    if (!AtEnd()) {
      return Error(Peek() == ')' ? "unbalanced ')'"
                                 : "anchors are only supported at the start and the end");
    }
    return out;
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  absl::Status Error(const std::string& problem) {
    status_ = absl::InvalidArgumentError(absl::StrCat("at offset ", pos_, ": ", problem));
    return status_;
  }
  int32_t Fail(const std::string& problem) {
    status_ = Error(problem);
    return -1;
  }
  bool Refuse(const std::string& problem) {
    status_ = Error(problem);
    return false;
  }

  int32_t ParseAlternatives(int depth) {
    if (depth > kMaxNesting) return Fail("groups nested too deeply");
    std::vector<int32_t> alternatives;
    while (true) {
      const int32_t seq = ParseSequence(depth);
      if (seq < 0) return -1;
      alternatives.push_back(seq);
      if (Peek() != '|') break;
      ++pos_;
    }
    return g_.AddList(Expr::Kind::kChoice, std::move(alternatives));
  }

  int32_t ParseSequence(int depth) {
    std::vector<int32_t> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && pos_ + 1 == p_.size()) break;
      int32_t item = ParseAtom(depth);
      if (item < 0) return -1;
      item = ParseQuantifiers(item);
      if (item < 0) return -1;
      items.push_back(item);
    }
    return g_.AddList(Expr::Kind::kSequence, std::move(items));
  }

  int32_t ParseAtom(int depth) {
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(depth);
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return g_.AddClass({{'\n', '\n'}}, /*negated=*/true);
      case '\\':
        return ParseEscapeAtom();
      case '^':
      case '$':
        return Fail("anchors are only supported at the start and the end");
      case '*':
      case '+':
      case '?':
        return Fail("quantifier without anything to repeat");
      default:
        break;
    }
    if (c == '{' && QuantifierAhead()) return Fail("quantifier without anything to repeat");
    const size_t len = Utf8CharLength(p_, pos_);
    std::string text(p_.substr(pos_, len));
    pos_ += len;
    return g_.AddLiteral(std::move(text));
  }

  int32_t ParseGroup(int depth) {
    const size_t open = pos_;
    ++pos_;
    if (Peek() == '?') {
      const char kind = Peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == 'P' && Peek(2) == '<') {
        pos_ += 3;
        if (!SkipGroupName()) return -1;
      } else if (kind == '<' && Peek(2) != '=' && Peek(2) != '!') {
        pos_ += 2;
        if (!SkipGroupName()) return -1;
      } else {
        pos_ = open;
        return Fail("lookarounds and inline flags are not supported");
      }
    }
    const int32_t inner = ParseAlternatives(depth + 1);
    if (inner < 0) return -1;
    if (Peek() != ')') {
      pos_ = open;
      return Fail("unbalanced '('");
    }
    ++pos_;
    return inner;
  }

  bool SkipGroupName() {
    while (!AtEnd() && Peek() != '>') ++pos_;
    if (AtEnd()) return Refuse("unterminated group name");
    ++pos_;
    return true;
  }

  // Whether a {m}, {m,} or {m,n} quantifier starts at pos_.
  bool QuantifierAhead() const {
    size_t i = pos_ + 1;
    const size_t digits_begin = i;
    while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
    if (i == digits_begin) return false;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
    }
    return i < p_.size() && p_[i] == '}';
  }

  bool ParseBound(int32_t& value) {
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepetition) {
        return Refuse(absl::StrCat("repetition bound above ", kMaxRepetition));
      }
      ++pos_;
    }
    value = static_cast<int32_t>(v);
    return true;
  }

  int32_t ParseQuantifiers(int32_t item) {
    while (true) {
      int32_t min = 0, max = 0;
      const char c = Peek();
      if (c == '*') {
        max = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1;
        max = kUnbounded;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{' && QuantifierAhead()) {
        const size_t brace = pos_;
        ++pos_;
        if (!ParseBound(min)) return -1;
        max = min;
        if (Peek() == ',') {
          ++pos_;
          max = kUnbounded;
          if (Peek() != '}' && !ParseBound(max)) return -1;
        }
        if (max != kUnbounded && max < min) {
          pos_ = brace;
          return Fail("repetition {m,n} with n < m");
        }
        ++pos_;
      } else {
        return item;
      }
      if (Peek() == '?') ++pos_;  // lazy: the same language
      item = g_.AddRepeat(item, min, max);
    }
  }

  // A backslash escape outside a class.
  int32_t ParseEscapeAtom() {
    std::vector<CodepointRange> ranges;
    bool negated = false;
    if (ParseClassEscape(ranges, negated)) {
      return g_.AddClass(NormalizeRanges(std::move(ranges)), negated);
    }
    if (!status_.ok()) return -1;
    char32_t c = 0;
    if (!ParseCharEscape(c)) return -1;
    return g_.AddLiteral(EncodeUtf8(c));
  }

  // \d \w \s and their negations; false (pos_ unchanged) for other escapes.
  bool ParseClassEscape(std::vector<CodepointRange>& ranges, bool& negated) {
    const char e = Peek(1);
    const std::vector<CodepointRange>* set = nullptr;
    switch (e) {
      case 'd':
      case 'D':
        set = &DigitRanges();
        break;
      case 'w':
      case 'W':
        set = &WordRanges();
        break;
      case 's':
      case 'S':
        set = &SpaceRanges();
        break;
      default:
        return false;
    }
    pos_ += 2;
    ranges.insert(ranges.end(), set->begin(), set->end());
    negated = e == 'D' || e == 'W' || e == 'S';
    return true;
  }

  // Any other escape: one code point, or an error for the unsupported ones.
  bool ParseCharEscape(char32_t& out) {
    const size_t at = pos_;
    const char e = Peek(1);
    pos_ += 2;
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
      case 'f':
        out = '\f';
        return true;
      case 'v':
        out = '\v';
        return true;
      case '0':
        out = 0;
        return true;
      case 'x':
        return ParseHex(2, out);
      case 'u':
        if (Peek() == '{') return ParseBracedHex(out);
        return ParseHex(4, out);
      case '\0':
        pos_ = at;
        return Refuse("trailing backslash");
      default:
        break;
    }
    if ((e >= '1' && e <= '9') || e == 'b' || e == 'B' || e == 'k') {
      pos_ = at;
      return Refuse("backreferences and word boundaries are not supported");
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      pos_ = at;
      return Refuse(absl::StrCat("unknown escape \\", std::string(1, e)));
    }
    pos_ = at + 1;
    const size_t len = Utf8CharLength(p_, pos_);
    out = DecodeUtf8(p_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  bool ParseHex(int digits, char32_t& out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0) return Refuse("expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    out = v;
    return true;
  }

  bool ParseBracedHex(char32_t& out) {
    ++pos_;
    uint32_t v = 0;
    int n = 0;
    while (HexValue(Peek()) >= 0 && n < 8) {
      v = v * 16 + static_cast<uint32_t>(HexValue(Peek()));
      ++pos_;
      ++n;
    }
    if (n == 0 || Peek() != '}' || v > kMaxCodepoint) return Refuse("bad \\u{...} escape");
    ++pos_;
    out = v;
    return true;
  }

  // One class member: a character (escapes decoded) or a class escape.
  bool ParseClassChar(char32_t& out, std::vector<CodepointRange>& ranges, bool& was_set) {
    was_set = false;
    if (Peek() == '\\') {
      std::vector<CodepointRange> set;
      bool negated = false;
      if (ParseClassEscape(set, negated)) {
        set = NormalizeRanges(std::move(set));
        if (negated) set = ComplementRanges(set);
        ranges.insert(ranges.end(), set.begin(), set.end());
        was_set = true;
        return true;
      }
      return ParseCharEscape(out);
    }
    const size_t len = Utf8CharLength(p_, pos_);
    out = DecodeUtf8(p_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  int32_t ParseClass() {
    const size_t open = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    if (Peek() == '[' && Peek(1) == ':') return Fail("POSIX classes are not supported");
    std::vector<CodepointRange> ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) {
        pos_ = open;
        return Fail("unterminated character class");
      }
      if (Peek() == ']' && !first) break;
      first = false;
      char32_t lo = 0;
      bool was_set = false;
      if (!ParseClassChar(lo, ranges, was_set)) return -1;
      if (was_set) continue;
      char32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
        ++pos_;
        bool hi_set = false;
        if (!ParseClassChar(hi, ranges, hi_set)) return -1;
        if (hi_set) return Fail("a class escape cannot end a range");
        if (hi < lo) return Fail("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return g_.AddClass(NormalizeRanges(std::move(ranges)), negated);
  }

  std::string_view p_;
  Grammar& g_;
  size_t pos_ = 0;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<RegexParse> ParseRegexInto(std::string_view pattern, Grammar& grammar) {
  return RegexParser(pattern, grammar).Parse();
}

absl::StatusOr<Grammar> ParseRegex(std::string_view pattern) {
  Grammar grammar;
  absl::StatusOr<RegexParse> parse = ParseRegexInto(pattern, grammar);
  if (!parse.ok()) return parse.status();
  grammar.rules.push_back(Rule{"root", parse->expr});
  grammar.root = 0;
  return grammar;
}

}  // namespace loom::constraint
