// What a client asked for, resolved to concrete values: stopping criteria and
// the request-level options that the scheduler and engine act on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "types/constraint.h"
#include "types/sampling_params.h"

namespace loom {

// The engine's and the scheduler's id of a submitted request.
using RequestHandle = uint64_t;

struct StoppingParams {
  int32_t max_tokens = 256;
  int32_t min_tokens = 0;
  std::vector<std::string> stop;  // stop strings, matched on detokenized text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
};

enum class FinishReason { kNone, kStop, kLength, kAborted };

// A validated, tokenized request as the engine receives it from the server.
struct RequestParams {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  StoppingParams stopping;
  int32_t n = 1;         // independent samples sharing the prompt's KV blocks
  int32_t priority = 0;  // lower is scheduled first
  std::string cache_salt;
  // The tenant of the caller's API key (server/api_keys.h); empty without.
  std::string tenant;
  // -1: off. 0..kMaxTopLogprobs: the logprob of every prompt token after the
  // first, with that many alternatives. Such a request skips prefix-cache
  // hits so that every prompt position is computed.
  int32_t prompt_logprobs = -1;
  // The structured-output constraint every sample's tokens must follow
  // (types/constraint.h); null: unconstrained.
  std::shared_ptr<const TokenConstraint> constraint;
  absl::Time arrival_time = absl::InfinitePast();
  absl::Time deadline = absl::InfiniteFuture();
};

}  // namespace loom
