#include "tokenizer/pretokenizer.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "re2/re2.h"

namespace loom {
namespace {

// Oniguruma's \s is Unicode White_Space; RE2's is ASCII only.
constexpr char kSpaceClass[] = R"(\t\n\x0B\f\r\x{85}\p{Z})";
constexpr std::string_view kTrailingSpaceRule = R"(|\s+(?!\S)|\s+)";

}  // namespace

absl::StatusOr<std::string> TranslatePattern(std::string_view pattern, bool& trailing_space_rule) {
  trailing_space_rule = false;
  if (pattern.ends_with(kTrailingSpaceRule)) {
    pattern.remove_suffix(kTrailingSpaceRule.size());
    trailing_space_rule = true;
  }
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        absl::StrAppend(&out, in_class ? "" : "[", kSpaceClass, in_class ? "" : "]");
      } else if (e == 'S') {
        if (in_class) return absl::UnimplementedError("\\S inside a character class");
        absl::StrAppend(&out, "[^", kSpaceClass, "]");
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '(' && pattern.substr(i).starts_with("(?") && !pattern.substr(i).starts_with("(?i:") &&
        !pattern.substr(i).starts_with("(?:")) {
      return absl::UnimplementedError(
          absl::StrCat("unsupported group in pre-tokenizer pattern: ", std::string(pattern)));
    }
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class && !out.ends_with("[") && !out.ends_with("[^")) {
      in_class = false;
    }
    out.push_back(c);
  }
  if (trailing_space_rule) absl::StrAppend(&out, "|([", kSpaceClass, "]+)");
  return out;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pattern,
                                                                   bool split_digits,
                                                                   bool add_prefix_space) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  p->add_prefix_space_ = add_prefix_space;
  if (!pattern.empty()) {
    LOOM_ASSIGN_OR_RETURN(const std::string translated,
                          TranslatePattern(pattern, p->trailing_space_rule_));
    p->pattern_ = std::make_unique<re2::RE2>(translated, re2::RE2::Quiet);
    if (!p->pattern_->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad pre-tokenizer pattern: ", p->pattern_->error()));
    }
  }
  if (split_digits) p->digit_ = std::make_unique<re2::RE2>(R"(\p{N})");
  return p;
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>& out) const {
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') out.push_back(" ");
  if (digit_ == nullptr) {
    SplitPattern(text, out);
    return;
  }
  size_t pos = 0;
  re2::StringPiece digit;
  while (pos < text.size()) {
    re2::StringPiece input(text.data(), text.size());
    if (!digit_->Match(input, pos, text.size(), re2::RE2::UNANCHORED, &digit, 1)) break;
    const size_t begin = digit.data() - text.data();
    SplitPattern(text.substr(pos, begin - pos), out);
    out.push_back(text.substr(begin, digit.size()));
    pos = begin + digit.size();
  }
  SplitPattern(text.substr(pos), out);
}

void PreTokenizer::SplitPattern(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  if (pattern_ == nullptr) {
    out.push_back(text);
    return;
  }
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece groups[2];
  const int num_groups = trailing_space_rule_ ? 2 : 1;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!pattern_->Match(input, pos, text.size(), re2::RE2::UNANCHORED, groups, num_groups) ||
        groups[0].empty()) {
      out.push_back(text.substr(pos));  // no match: the rest is one piece
      return;
    }
    const size_t begin = groups[0].data() - text.data();
    size_t end = begin + groups[0].size();
    if (begin > pos) out.push_back(text.substr(pos, begin - pos));
    // \s+(?!\S): a run of spaces followed by a non-space leaves its last
    // character to the next pre-token.
    if (trailing_space_rule_ && groups[1].data() != nullptr && end < text.size()) {
      size_t last = begin;
      for (size_t i = begin; i < end; i += Utf8CharLength(text, i)) last = i;
      if (last > begin) end = last;
    }
    out.push_back(text.substr(begin, end - begin));
    pos = end;
  }
}

}  // namespace loom
