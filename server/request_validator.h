// Checks a request's fields against the ranges of API.md §1 before any work is
// done. Each failure is INVALID_ARGUMENT naming the field and its allowed range,
// e.g. "sampling.temperature must be in [0, 100]; got 250". Checks that need
// the prompt's token count live in RequestBuilder.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"

namespace loom {

inline constexpr int kMaxRequestIdLength = 128;
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxLogprobs = 20;
inline constexpr int kMaxSamples = 16;
inline constexpr int32_t kDefaultMaxLogitBias = 1024;

// Limits set by flags (API.md §3).
struct RequestLimits {
  int32_t max_logit_bias = kDefaultMaxLogitBias;  // --max_logit_bias: entries per request
};

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, int32_t vocab_size,
                                     const RequestLimits& limits = {});

absl::Status ValidateTokenizeRequest(const v1::TokenizeRequest& request);

// Shared by both requests: a non-empty list of system/user/assistant turns.
absl::Status ValidateChatMessages(const v1::ChatMessages& messages, const char* field);

}  // namespace loom
