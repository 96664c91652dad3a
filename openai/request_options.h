// What an OpenAI request asks for beyond loom::v1::GenerateRequest: how the
// front end shapes the response (streaming, usage chunks, echo, the logprobs
// format) and the vLLM fields the proto has no counterpart for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loom::openai {

struct OpenAiOptions {
  std::string model;  // the served model name asked for; empty when not given
  std::string user;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final usage chunk
  int32_t n = 1;               // samples per prompt (also sampling.n when given)
  bool echo = false;           // completions: prepend the prompt to each choice's text
  // Completions' logprobs (an int: how many alternatives), or chat's
  // logprobs=true (with top_logprobs alternatives). Unset: no logprobs.
  std::optional<int32_t> logprobs;
  // vLLM's skip_special_tokens (default true): the proto has no field, the
  // detokenizer's setting applies.
  std::optional<bool> skip_special_tokens;
  // vLLM's truncate_prompt_tokens: keep the last k prompt tokens. -1 (keep
  // what fits) is also set as truncate = TRUNCATION_LEFT; k >= 1 has no proto
  // counterpart and is the front end's to apply.
  std::optional<int32_t> truncate_prompt_tokens;
  // vLLM's prompt_logprobs: render the choice's prompt_logprobs field.
  std::optional<int32_t> prompt_logprobs;
  // The OpenAI field that set the request's constraint
  // ("response_format.json_schema.schema", "structured_outputs.regex", ...),
  // which the constraint's errors are renamed to; empty when none did.
  std::string constraint_field;
};

}  // namespace loom::openai
