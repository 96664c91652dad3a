// POST /v1/chat/completions: a JSON body -> loom::v1::GenerateRequest with
// `messages` set, plus the OpenAI-only options. Content is a string or an
// array of {"type": "text", "text"} parts (joined with "\n"). Only types and
// shapes are checked; roles and ranges are server/request_validator's.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loom/v1/generation.pb.h"
#include "openai/request_options.h"

namespace loom::openai {

struct ChatRequest {
  v1::GenerateRequest request;
  OpenAiOptions options;
};

// INVALID_ARGUMENT naming the parameter (see ToOpenAiError) on a type or shape error.
absl::StatusOr<ChatRequest> ParseChatRequest(absl::string_view body);

}  // namespace loom::openai
