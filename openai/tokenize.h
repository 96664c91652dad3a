// vLLM's /tokenize, /detokenize and /version bodies. /tokenize takes
// {"prompt": string} or {"messages": [...]} (rendered with the chat template)
// and optional "add_special_tokens"; /detokenize takes {"tokens": [ids]}.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loom/v1/generation.pb.h"

namespace loom::openai {

struct TokenizeRequest {
  std::string model;  // empty when not given
  v1::TokenizeRequest request;
};
absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(absl::string_view body);

// {"count", "max_model_len", "tokens": [ids], "token_strs": [pieces]}
std::string RenderTokenizeResponse(std::span<const int32_t> ids,
                                   std::span<const std::string> pieces, int64_t max_model_len);

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(absl::string_view body);

// {"prompt": text}
std::string RenderDetokenizeResponse(absl::string_view text);

// {"version": version}
std::string RenderVersion(absl::string_view version);

}  // namespace loom::openai
