// Per-request sampling parameters, resolved to concrete values (API.md
// SamplingParams with defaults applied). Plain data shared by the scheduler and
// the executors' samplers.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace loom {

// The most top logprobs a request may ask for (API.md, logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Always set: the server draws one when the client leaves it unset. Sample i
  // of an n > 1 request uses a seed derived from (seed, i).
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias)
  // -1: no logprobs; k >= 0: the sampled token's logprob plus the k best.
  int32_t num_logprobs = -1;
};

}  // namespace loom
