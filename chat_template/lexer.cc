#include "chat_template/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace loom::jinja {

absl::Status SyntaxError(size_t pos, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template syntax error at offset ", pos, ": ", what));
}

namespace {

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }
bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool trim_next_newline = false, strip_next_whitespace = false;
    while (pos_ < src_.size()) {
      size_t tag = FindTag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      // Whether the text starts a line, for lstrip_blocks.
      bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      if (strip_next_whitespace) {
        size_t i = 0;
        while (i < text.size() && IsWhitespace(text[i])) ++i;
        text.erase(0, i);
      } else if (trim_next_newline) {
        if (text.starts_with("\n")) {
          text.erase(0, 1);
          line_starting = true;
        } else if (text.starts_with("\r\n")) {
          text.erase(0, 2);
          line_starting = true;
        }
      }
      trim_next_newline = strip_next_whitespace = false;
      if (tag == src_.size()) {
        Emit(Token::Type::kText, std::move(text), pos_);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && IsWhitespace(text.back())) text.pop_back();
      } else if (kind != '{' && modifier != '+') {
        // lstrip_blocks: only whitespace between the line start and the tag.
        size_t line_start = text.find_last_of('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        bool blank = true;
        for (size_t i = line_start; i < text.size(); ++i) blank = blank && IsSpaceOrTab(text[i]);
        if (blank && line_start < text.size() && (line_start > 0 || line_starting)) {
          text.erase(line_start);
        }
      }
      Emit(Token::Type::kText, std::move(text), pos_);
      pos_ = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) return SyntaxError(tag, "unterminated comment");
        strip_next_whitespace = end > pos_ && src_[end - 1] == '-';
        trim_next_newline = !(end > pos_ && src_[end - 1] == '+');
        pos_ = end + 2;
        continue;
      }
      tokens_.push_back({kind == '{' ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "", tag});
      LOOM_RETURN_IF_ERROR(LexExpression(kind == '{' ? '}' : '%'));
      strip_next_whitespace = close_modifier_ == '-';
      trim_next_newline = kind == '%' && close_modifier_ != '+';
    }
    tokens_.push_back({Token::Type::kEnd, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  size_t FindTag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  void Emit(Token::Type type, std::string text, size_t pos) {
    if (type == Token::Type::kText && text.empty()) return;
    tokens_.push_back({type, std::move(text), pos});
  }

  // Reads expression tokens up to the closing "}}" or "%}".
  absl::Status LexExpression(char close) {
    close_modifier_ = '\0';
    while (true) {
      while (pos_ < src_.size() && IsWhitespace(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) return SyntaxError(pos_, "unterminated tag");
      const size_t start = pos_;
      std::string_view rest = src_.substr(pos_);
      if ((rest.starts_with("-") || rest.starts_with("+")) && rest.size() >= 3 &&
          rest[1] == close && rest[2] == '}') {
        close_modifier_ = rest[0];
        pos_ += 3;
        tokens_.push_back(
            {close == '}' ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "", start});
        return absl::OkStatus();
      }
      if (rest.size() >= 2 && rest[0] == close && rest[1] == '}') {
        pos_ += 2;
        tokens_.push_back(
            {close == '}' ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "", start});
        return absl::OkStatus();
      }
      const char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
          ++pos_;
        }
        tokens_.push_back(
            {Token::Type::kName, std::string(src_.substr(start, pos_ - start)), start});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        bool is_float = false;
        while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                                      (src_[pos_] == '.' && !is_float && pos_ + 1 < src_.size() &&
                                       std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))))) {
          is_float = is_float || src_[pos_] == '.';
          ++pos_;
        }
        tokens_.push_back({is_float ? Token::Type::kFloat : Token::Type::kInt,
                           std::string(src_.substr(start, pos_ - start)), start});
      } else if (c == '\'' || c == '"') {
        LOOM_RETURN_IF_ERROR(LexString(c));
      } else {
        static constexpr std::string_view kOps[] = {
            "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
            ">",  "(",  ")",  "[",  "]",  "{",  "}", ".", ",", ":", "|", "="};
        bool found = false;
        for (std::string_view op : kOps) {
          if (rest.starts_with(op)) {
            tokens_.push_back({Token::Type::kOp, std::string(op), start});
            pos_ += op.size();
            found = true;
            break;
          }
        }
        if (!found)
          return SyntaxError(start, absl::StrCat("unexpected character '", std::string(1, c), "'"));
      }
    }
  }

  absl::Status LexString(char quote) {
    const size_t start = pos_++;
    std::string value;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      char c = src_[pos_++];
      if (c == '\\' && pos_ < src_.size()) {
        const char e = src_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case '\\':
          case '\'':
          case '"':
            c = e;
            break;
          default:
            value.push_back('\\');
            c = e;
            break;
        }
      }
      value.push_back(c);
    }
    if (pos_ >= src_.size()) return SyntaxError(start, "unterminated string");
    ++pos_;
    tokens_.push_back({Token::Type::kString, std::move(value), start});
    return absl::OkStatus();
  }

  std::string_view src_;
  size_t pos_ = 0;
  char close_modifier_ = '\0';  // '-' or '+' when the tag just closed with it
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) { return Lexer(source).Run(); }

}  // namespace loom::jinja
