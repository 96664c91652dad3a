// What every OpenAI response carries besides the engine's output: the
// response id, creation time, served model name, the request's options and
// the token-text lookup that logprobs need.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "loom/v1/generation.pb.h"
#include "openai/request_options.h"

namespace loom::openai {

// A token id's text (the tokenizer's piece, decoded); may be a partial UTF-8
// sequence, which renders with U+FFFD.
using TokenText = std::function<std::string(int32_t token_id)>;

struct ResponseContext {
  std::string id;       // "cmpl-..." or "chatcmpl-...", chosen by the caller
  int64_t created = 0;  // Unix seconds
  std::string model;    // the served model name
  OpenAiOptions options;
  TokenText token_text;  // required when options.logprobs is set
};

// Adds one prompt's usage into the request's total (completions with several prompts).
void AccumulateUsage(const v1::Usage& usage, v1::Usage* total);

}  // namespace loom::openai
