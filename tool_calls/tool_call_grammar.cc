#include "tool_calls/tool_call_grammar.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/check.h"
#include "constraint/json_schema_to_grammar.h"

namespace loom {
namespace {

constexpr char kAnyObject[] = R"({"type": "object"})";

// Rewrites JsonSchemaToGrammar's "json_schema: <where>: <what>" to name the
// tool it came from.
absl::Status ToolSchemaError(const absl::Status& status, size_t tool) {
  absl::string_view message = status.message();
  absl::ConsumePrefix(&message, "json_schema");
  return absl::InvalidArgumentError(absl::StrCat("tools[", tool, "].parameters", message));
}

}  // namespace

absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format,
                                            std::span<const ToolFunction> functions,
                                            bool single_call) {
  LOOM_CHECK(format != ToolCallFormat::kNone) << "no grammar for tool-call format none";
  LOOM_CHECK(!functions.empty()) << "a tool-call grammar needs a function";
  const bool hermes = format == ToolCallFormat::kHermes;
  std::string rules;
  std::string alternatives;
  for (size_t i = 0; i < functions.size(); ++i) {
    const ToolFunction& f = functions[i];
    const std::string rule = absl::StrCat("fn", i);
    const std::string args_rule = absl::StrCat(rule, "args");
    absl::StatusOr<std::string> args = JsonSchemaToGrammar(
        f.parameters.empty() ? std::string_view(kAnyObject) : std::string_view(f.parameters),
        args_rule);
    if (!args.ok()) return ToolSchemaError(args.status(), f.tool_index);
    // The name as a JSON string, then the key its format gives the arguments.
    const std::string head =
        absl::StrCat("\"", f.name, "\", \"", hermes ? "arguments" : "parameters", "\": ");
    absl::StrAppend(&rules, rule, " ::= ", GbnfQuote(head), " ", args_rule, "\n", *args, "\n");
    absl::StrAppend(&alternatives, i == 0 ? "" : " | ", rule);
  }
  const std::string separator = hermes ? "\n" : "; ";
  std::string grammar = single_call
                            ? "root ::= call\n"
                            : absl::StrCat("root ::= call (", GbnfQuote(separator), " call)*\n");
  absl::StrAppend(&grammar,
                  "call ::= ", GbnfQuote(hermes ? "<tool_call>\n{\"name\": " : "{\"name\": "), " (",
                  alternatives, ") ", GbnfQuote(hermes ? "}\n</tool_call>" : "}"), "\n", rules);
  return grammar;
}

}  // namespace loom
