// Logprobs in the two OpenAI formats. Completions:
//   {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: lp}],
//    "text_offset": [...]}
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
#pragma once

#include <cstddef>
#include <cstdint>

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

// echo with logprobs: the prompt's tokens come first, from the response's
// prompt_logprobs (the first token, which has no context, with null
// token_logprobs and top_logprobs), then the generated ones; text_offset
// starts at 0.
nlohmann::json EchoedCompletionLogprobsJson(int32_t first_prompt_token_id,
                                            const Logprobs& prompt_logprobs,
                                            const Logprobs& logprobs, const TokenText& token_text);

// vLLM's prompt_logprobs: [null, then per prompt token after the first
// {"<token id>": {"logprob", "rank", "decoded_token"}} for the token and its
// alternatives].
nlohmann::json PromptLogprobsJson(const Logprobs& prompt_logprobs, const TokenText& token_text);

nlohmann::json ChatLogprobsJson(const Logprobs& logprobs, const TokenText& token_text);

}  // namespace loom::openai
