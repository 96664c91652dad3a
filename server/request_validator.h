// Checks a request's fields against the ranges of API.md §1 before any work is
// done. Each failure is INVALID_ARGUMENT naming the field and its allowed range,
// e.g. "sampling.temperature must be in [0, 100]; got 250". Checks that need
// the prompt's token count live in RequestBuilder.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"
#include "types/generation_defaults.h"
#include "types/sampling_params.h"

namespace loom {

inline constexpr int kMaxRequestIdLength = 128;
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxLogprobs = kMaxTopLogprobs;
inline constexpr int kMaxSamples = 16;
inline constexpr int32_t kDefaultMaxLogitBias = 1024;
// priority is bounded so that the scheduler's arithmetic on it cannot overflow.
inline constexpr int32_t kMinPriority = -1'000'000;
inline constexpr int32_t kMaxPriority = 1'000'000;
// Tools a chat may offer, and strings a choice constraint may list.
inline constexpr int kMaxTools = 128;
inline constexpr int kMaxChoices = 1024;

// The size limits an operator sets with flags (docs/api.md): every field that
// could otherwise grow without bound has one.
struct RequestLimits {
  int32_t max_logit_bias = kDefaultMaxLogitBias;  // sampling.logit_bias entries
  int32_t max_stop_token_ids = 128;               // stopping.stop_token_ids entries
  int32_t max_cache_salt_bytes = 256;             // cache_salt
  int64_t max_prompt_bytes = int64_t{1} << 20;    // prompt text, or all messages together
  int32_t max_prompt_tokens = int32_t{1} << 20;   // prompt_token_ids.ids entries
  // A constraint's text (json_schema, regex, grammar; a choice's strings
  // together), and each tool's parameter schema.
  int64_t max_constraint_bytes = int64_t{256} << 10;
};

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, int32_t vocab_size,
                                     const RequestLimits& limits = {});

// The server's generation defaults obey the request fields' ranges (the same
// messages, e.g. "sampling.temperature must be in [0, 100]; got 250"), and
// max_tokens is at least 1.
absl::Status ValidateGenerationDefaults(const GenerationDefaults& defaults);

absl::Status ValidateTokenizeRequest(const v1::TokenizeRequest& request,
                                     const RequestLimits& limits = {});

}  // namespace loom
