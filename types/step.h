// The plain data exchanged between the scheduler and an executor, once per
// engine step (vLLM's SchedulerOutput / ModelRunnerOutput). Header-only: the
// model module sees nothing of the scheduler but these structs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "types/sampling_params.h"

namespace loom {

// One sequence's slice of a step. The sequence's tokens are
//
//   |<-------------------- all_token_ids ----------------------->|
//   |<--- num_computed_tokens --->|<- num_scheduled_tokens ->|   |
//   [  already in the KV cache    |  computed in this step   | rest (later chunks)
//
// The executor computes K/V for positions [num_computed_tokens,
// num_computed_tokens + num_scheduled_tokens), writes them into the blocks of
// block_table, and attends over every position up to each query (causal).
struct ScheduledSeq {
  int64_t seq_id = 0;
  // Prompt followed by the generated tokens, as far as they are known. Valid
  // for the duration of Execute(); owned by the scheduler.
  std::span<const int32_t> all_token_ids;
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;
  int32_t num_scheduled_tokens = 0;
  // True when this slice reaches the last known token: the executor samples
  // one new token for it from the logits of that last position.
  bool sample = false;
  // When >= 0: the executor also returns, for every position p of this slice
  // with p + 1 < num_prompt_tokens, the raw model logprob of prompt token
  // p + 1 and the top num_prompt_logprobs alternatives (no sampling
  // parameters applied). Fits in the padding after sample.
  int8_t num_prompt_logprobs = -1;
  // Block ids covering at least num_computed_tokens + num_scheduled_tokens
  // positions; position p lives in block_table[p / block_size], slot
  // p % block_size. Valid for the duration of Execute().
  std::span<const int32_t> block_table;
  const SamplingParams* sampling = nullptr;  // set when sample is true
};

// A plan holds one per running sequence: one cache line each.
static_assert(sizeof(ScheduledSeq) <= 64);

// The allowed next tokens of the step's constrained samples (structured
// outputs, types/constraint.h): one packed row per constrained sample, token
// t allowed when bit t % 32 of word t / 32 of its row is set; tokens past the
// row are not. An unconstrained step carries nothing (row_of_seq empty), and
// an unconstrained sample has no row.
struct TokenMasks {
  int32_t words_per_row = 0;
  std::vector<int32_t> row_of_seq;  // per StepPlan::seqs entry: its row, or -1
  std::vector<uint32_t> bits;       // [rows, words_per_row]

  // The row of StepPlan::seqs[seq_index]'s sample; null when unconstrained.
  const uint32_t* RowOf(size_t seq_index) const {
    if (seq_index >= row_of_seq.size() || row_of_seq[seq_index] < 0) return nullptr;
    return bits.data() + static_cast<size_t>(row_of_seq[seq_index]) * words_per_row;
  }
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;    // prefill chunks and decodes, in any order
  int32_t num_scheduled_tokens = 0;  // sum over seqs
  TokenMasks token_masks;
};

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int64_t seq_id = 0;
  int32_t token_id = 0;
  float logprob = 0.0f;         // of token_id, after penalties, before temperature
  std::vector<TopLogprob> top;  // when sampling->num_logprobs > 0, best first
};

// The logprob of one prompt token given the tokens before it.
struct PromptTokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int32_t rank = 0;             // 1 + the number of tokens with a greater logit
  std::vector<TopLogprob> top;  // best first, num_prompt_logprobs of them
};

// The prompt logprobs of one slice: entries[i] is about prompt token
// first_position + i (always >= 1: the first token has no context).
struct PromptLogprobsChunk {
  int64_t seq_id = 0;
  int32_t first_position = 1;
  std::vector<PromptTokenLogprob> entries;
};

struct StepResult {
  std::vector<SampledToken> sampled;  // one per ScheduledSeq with sample = true
  // One per ScheduledSeq with num_prompt_logprobs >= 0 and a position to score.
  std::vector<PromptLogprobsChunk> prompt_logprobs;
};

}  // namespace loom
