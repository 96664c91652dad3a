// JSON pieces shared by the completion and chat renderers.
#pragma once

#include <string>

#include "loom/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "openai/response_context.h"

namespace loom::openai {

// "stop", "length", "abort", or null while the sample is unfinished.
nlohmann::json FinishReasonJson(v1::FinishReason reason);

// The matched stop string (vLLM's stop_reason), or null.
nlohmann::json StopReasonJson(const std::string& stop_reason);

// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens}
nlohmann::json UsageJson(const v1::Usage& usage);

// id, object, created, model.
nlohmann::json Envelope(const ResponseContext& context, const char* object);

// Compact JSON; invalid UTF-8 in token texts becomes U+FFFD instead of throwing.
std::string Dump(const nlohmann::json& json);

// JSON cannot hold -inf: like vLLM, a logprob below -9999 renders as -9999.
double LogprobJson(float logprob);

}  // namespace loom::openai
