// Logprobs in the two OpenAI formats. Completions:
//   {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: lp}],
//    "text_offset": [...]}
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
#pragma once

#include <cstddef>

#include "google/protobuf/repeated_ptr_field.h"
#include "loom/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "openai/response_context.h"

namespace loom::openai {

using Logprobs = google::protobuf::RepeatedPtrField<v1::TokenLogprob>;

// text_offset counts bytes from the start of the choice's text; `offset` is
// where the first token starts (the echoed prompt's length, or what earlier
// stream chunks of the choice carried).
nlohmann::json CompletionLogprobsJson(const Logprobs& logprobs, const TokenText& token_text,
                                      size_t offset);

nlohmann::json ChatLogprobsJson(const Logprobs& logprobs, const TokenText& token_text);

}  // namespace loom::openai
