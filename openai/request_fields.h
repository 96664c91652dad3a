// The request fields that /v1/completions and /v1/chat/completions share:
// sampling, stopping, streaming and vLLM's extra parameters.
#pragma once

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"
#include "openai/ordered_json.h"
#include "openai/request_options.h"

namespace loom::openai {

// Reads the shared fields of `body` into `request` and `options`.
absl::Status ReadSharedFields(const Json& body, v1::GenerateRequest* request,
                              OpenAiOptions* options);

}  // namespace loom::openai
