// POST /v1/completions: a JSON body -> one loom::v1::GenerateRequest per
// prompt (a string, an array of strings, an array of token ids or an array of
// token-id arrays) plus the OpenAI-only options. Only types and shapes are
// checked; ranges are server/request_validator's.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loom/v1/generation.pb.h"
#include "openai/request_options.h"

namespace loom::openai {

struct CompletionRequest {
  std::vector<v1::GenerateRequest> prompts;  // choices are numbered prompt * n + sample
  OpenAiOptions options;
};

// INVALID_ARGUMENT naming the parameter (see ToOpenAiError) on a type or shape error.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(absl::string_view body);

}  // namespace loom::openai
