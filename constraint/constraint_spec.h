// What a client asks the output to follow, before compilation: the kind of
// constraint and its text, as the API's `constraint` oneof, OpenAI's
// `response_format` and vLLM's `structured_outputs` carry it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom {

enum class ConstraintKind {
  kJsonSchema,  // text: a JSON Schema (docs/api.md lists the supported subset)
  kRegex,       // text: a regular expression the whole output must match
  kGrammar,     // text: a GBNF grammar (llama.cpp's dialect) with a rule "root"
  kJsonObject,  // any JSON object; text unused
  kChoice,      // exactly one of `choices`; text unused
};

// "json_schema", "regex", "grammar", "json_object", "choice": the prefix of
// every compile error, as the API names the kinds.
std::string_view ConstraintKindName(ConstraintKind kind);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;  // kChoice: at least one, each non-empty
};

}  // namespace loom
