// JSON Schema -> Grammar, the subset OpenAI's structured outputs accept (see
// docs/api.md, "Structured outputs"): type (and type lists), properties,
// required, additionalProperties, enum, const, items, prefixItems, minItems,
// maxItems, anyOf (oneOf read as anyOf), single-entry allOf, $ref into the
// document ($defs, definitions, "#"), minLength, maxLength, pattern, a few
// formats, and integer bounds. Properties come out in the schema's order,
// and only the listed ones; the JSON is compact or indented with bounded
// whitespace, so that a model cannot pad forever.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "constraint/grammar.h"

namespace loom::constraint {

// The most nested schema levels a document may have.
inline constexpr int kMaxSchemaDepth = 64;

// Rules named `root_rule` and `<root_rule>-<suffix>`. INVALID_ARGUMENT "at
// <JSON pointer>: <problem>" for invalid JSON, a schema outside the subset or
// a schema that no document satisfies.
absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_json, std::string_view root_rule);

// Any JSON object, as the json_object constraint allows: rules named
// `root_rule` and `<root_rule>-<suffix>`.
Grammar JsonObjectGrammar(std::string_view root_rule);

}  // namespace loom::constraint
