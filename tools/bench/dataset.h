// The prompts of a `loom bench` run: seeded random token ids of lengths drawn
// uniformly from [len·(1−r), len·(1+r)], as vLLM's random dataset, or a JSONL
// file of {"prompt": "...", "output_len": N} lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::bench {

struct BenchPrompt {
  std::string text;                // set for JSONL prompts
  std::vector<int32_t> token_ids;  // set for random prompts (sent as prompt_token_ids)
  int32_t output_len = 0;          // max_tokens, with ignore_eos
};

struct RandomDatasetOptions {
  int num_prompts = 200;
  int input_len = 256;
  int output_len = 128;
  double range_ratio = 0;
  // Token ids are drawn from [min_token_id, max_token_id), a range without
  // special tokens so that every prompt is ordinary text to the model.
  int32_t min_token_id = 0;
  int32_t max_token_id = 0;
  uint64_t seed = 0;
};

absl::StatusOr<std::vector<BenchPrompt>> RandomDataset(const RandomDatasetOptions& options);

// The first num_prompts lines (cycling when the file has fewer); output_len
// defaults to default_output_len when a line lacks it.
absl::StatusOr<std::vector<BenchPrompt>> JsonlDataset(const std::string& path, int num_prompts,
                                                      int default_output_len);

// A token id range of the vocabulary that holds no special tokens in the
// Llama-family vocabularies Loom serves: special and added tokens sit at the
// very start (SmolLM, GPT-2 style) or the very end (Llama 3, Qwen2).
void SafeTokenRange(int32_t vocab_size, int32_t& min_token_id, int32_t& max_token_id);

}  // namespace loom::bench
