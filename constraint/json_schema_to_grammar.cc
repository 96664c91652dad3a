#include "constraint/json_schema_to_grammar.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "constraint/gbnf_printer.h"
#include "constraint/json_schema_grammar.h"

namespace loom {
namespace {

bool IsRootRuleName(std::string_view name) {
  if (name.empty() || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z'))) {
    return false;
  }
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema_json,
                                                std::string_view root_rule) {
  if (!IsRootRuleName(root_rule)) {
    return absl::InvalidArgumentError(absl::StrCat("json_schema: the root rule name \"",
                                                   std::string(root_rule),
                                                   "\" must match [A-Za-z][A-Za-z0-9_]*"));
  }
  absl::StatusOr<constraint::Grammar> grammar =
      constraint::JsonSchemaGrammar(schema_json, root_rule);
  if (!grammar.ok()) {
    return absl::Status(grammar.status().code(),
                        absl::StrCat("json_schema: ", std::string(grammar.status().message())));
  }
  return constraint::PrintGbnf(*grammar);
}

std::string GbnfQuote(std::string_view text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += absl::StrFormat("\\x%02X", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace loom
