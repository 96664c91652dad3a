#include "constraint/json_schema_to_grammar.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace loom {

absl::StatusOr<std::string> JsonSchemaToGrammar(std::string_view, std::string_view) {
  return absl::UnimplementedError("json_schema: the schema compiler is not built yet");
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
