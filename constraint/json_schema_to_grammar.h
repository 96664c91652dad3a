// JSON Schema -> GBNF text, for callers that compose grammars around a schema
// (a tool call's wrapper around its function's parameter schema):
//
//   root ::= "<tool_call>\n" call "\n</tool_call>"
//   call ::= "{\"name\": " "\"get_weather\"" ", \"arguments\": " args "}"
//   <JsonSchemaToGrammar(parameters, "args")>
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loom {

// GBNF rules (docs/api.md, "Structured outputs") that match exactly the JSON
// documents the schema accepts, as compact or indented JSON. The schema's
// own rule is `root_rule`; every other rule it defines is named
// `<root_rule>-<suffix>`, so that the rules of two schemas converted under
// different root names never collide. root_rule must match [A-Za-z][A-Za-z0-9_]*.
// INVALID_ARGUMENT, as ConstraintCompiler::Compile reports it
// ("json_schema: at /properties/age: ..."), for invalid JSON or a schema
// outside the supported subset.
absl::StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema_json,
                                                std::string_view root_rule);

// `text` as a GBNF string literal, quotes included: "a\"b" for a"b.
std::string GbnfQuote(std::string_view text);

}  // namespace loom
