// The scalar parts of JSON Schema conversion: strings (minLength, maxLength,
// pattern, format), integers with bounds, and numbers with the bounds that
// stay cheap (integer bounds at or above zero; no exponent then).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "constraint/json_grammar_builder.h"
#include "nlohmann/json.hpp"

namespace loom::constraint {

class JsonSchemaStrings {
 public:
  explicit JsonSchemaStrings(JsonGrammarBuilder& b) : b_(b) {}

  // Each returns the value's expression, or INVALID_ARGUMENT "at <path>: ...".
  absl::StatusOr<int32_t> Visit(const nlohmann::ordered_json& schema, const std::string& path);
  absl::StatusOr<int32_t> VisitInteger(const nlohmann::ordered_json& schema,
                                       const std::string& path);
  absl::StatusOr<int32_t> VisitNumber(const nlohmann::ordered_json& schema,
                                      const std::string& path);

 private:
  // The pattern as a string's contents: search semantics unless anchored,
  // characters that JSON must escape left out.
  absl::StatusOr<int32_t> Pattern(const std::string& pattern, const std::string& path);
  absl::StatusOr<int32_t> Format(const std::string& format, const std::string& path);

  JsonGrammarBuilder& b_;
};

}  // namespace loom::constraint
