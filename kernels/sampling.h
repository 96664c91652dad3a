// Token sampling from one row of logits per sequence. Both backends follow the
// same recipe, in this order, so that a seeded request draws the same token on
// either and whatever else is in the batch:
//  1. penalties: repetition_penalty (Hugging Face: each distinct token of the
//     prompt and output, logit > 0 ? logit / r : logit * r), then
//     frequency_penalty * count + presence_penalty * (count > 0) subtracted for
//     each token of the output;
//  2. logit bias added, then every token outside the row's allowed-token
//     mask (when it has one: structured outputs) set to -inf, so that it is
//     never drawn (callers drop top logprob entries of -inf);
//  3. logprobs: log_softmax of these logits (before temperature): the sampled
//     token's and the num_logprobs best (descending, lower id first on ties);
//  4. temperature below kGreedyTemperature (0, or so small that 1 / T would
//     overflow): argmax (lower id on ties). Otherwise, over the tempered
//     logits (logits / temperature): top_k keeps the k best by descending
//     logit and every token tied with the k-th (0 = all); min_p drops tokens
//     whose probability is below min_p * the best one's; top_p, over the
//     probabilities renormalised on what is left, keeps the shortest
//     best-first prefix whose sum reaches top_p (at least one token) and every
//     token tied with its last;
//  5. the draw: u = PhiloxUniform(seed, step, 0) * (sum of kept probabilities);
//     walking the kept tokens in ascending id order, the first whose running
//     sum exceeds u (the last kept one if rounding leaves none).
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace loom::kernels {

class ParallelFor;

// Temperatures below this sample greedily on every backend.
inline constexpr float kGreedyTemperature = 1e-5f;
LOOM_HOST_DEVICE inline bool IsGreedyTemperature(float temperature) {
  return !(temperature >= kGreedyTemperature);  // NaN too
}

struct SamplingRowParams {
  float temperature = 1.0f;  // < kGreedyTemperature: greedy
  float top_p = 1.0f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;  // tokens generated so far by this sequence (Philox counter)
  // The sequence's tokens: prompt, then output.
  const int32_t* token_ids = nullptr;
  int32_t num_prompt_tokens = 0;
  int32_t num_tokens = 0;
  const int32_t* bias_token_ids = nullptr;  // [num_bias]
  const float* bias_values = nullptr;       // [num_bias]
  int32_t num_bias = 0;
  int32_t num_logprobs = -1;  // -1: none; k >= 0: sampled token's plus k best
  // Packed allowed tokens (token t: bit t % 32 of word t / 32; tokens past
  // allowed_words * 32 are not allowed), or null: every token is. A row
  // that allows no token with a finite logit yields its lowest allowed id.
  const uint32_t* allowed_tokens = nullptr;
  int32_t allowed_words = 0;
  // >= 0: the row's token, already found from the head without its logits
  // (a greedy row the CPU screened, which asks for no logprobs); the row's
  // logits are not read.
  int32_t chosen_token = -1;
};

LOOM_HOST_DEVICE inline bool TokenAllowed(const uint32_t* mask, int32_t words, int32_t token) {
  return token < words * 32 && ((mask[token >> 5] >> (token & 31)) & 1u) != 0;
}

struct SamplingBatchParams {
  float* logits = nullptr;  // [num_rows, vocab_size]; overwritten (scratch)
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
  const SamplingRowParams* rows = nullptr;  // [num_rows]
  int32_t* out_token_ids = nullptr;         // [num_rows]
  float* out_logprobs = nullptr;            // [num_rows], of the sampled token
  // [num_rows, max_top_logprobs]; row r fills its first rows[r].num_logprobs.
  int32_t max_top_logprobs = 0;
  int32_t* out_top_ids = nullptr;
  float* out_top_logprobs = nullptr;
};

namespace cpu {
// Rows are independent; they run in parallel on the pool.
void Sample(const SamplingBatchParams& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
