// Tokens of the Jinja subset: text between tags, tag delimiters and the
// expression tokens inside tags, with Jinja's whitespace control applied.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::jinja {

struct Token {
  enum class Type {
    kText,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEnd
  };
  Type type;
  std::string text;
  size_t pos = 0;  // offset in the source, for error messages
};

// Whitespace control follows transformers' environment: "-" modifiers,
// trim_blocks (the newline after a block tag goes) and lstrip_blocks
// (indentation before a block tag goes).
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

absl::Status SyntaxError(size_t pos, absl::string_view what);

}  // namespace loom::jinja
