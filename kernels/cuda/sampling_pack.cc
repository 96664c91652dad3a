#include <unordered_map>

#include "kernels/cuda/sampling.h"

namespace loom::kernels::cuda {

void SamplingBatchPack::Add(const SamplingRowParams& row) {
  SamplingRowGpu g;
  g.temperature = row.temperature;
  g.top_p = row.top_p;
  g.top_k = row.top_k;
  g.min_p = row.min_p;
  g.repetition_penalty = row.repetition_penalty;
  g.presence_penalty = row.presence_penalty;
  g.frequency_penalty = row.frequency_penalty;
  g.seed = row.seed;
  g.step = row.step;
  g.num_logprobs = row.num_logprobs;
  g.penalty_begin = static_cast<int32_t>(penalties.size());
  const bool repetition = row.repetition_penalty != 1.0f;
  const bool additive = row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f;
  if (repetition || additive) {
    // Distinct tokens in first-seen order; repetition applies to prompt and
    // output, the additive penalties to output occurrences only.
    std::unordered_map<int32_t, int32_t> index;
    for (int32_t i = 0; i < row.num_tokens; ++i) {
      const int32_t id = row.token_ids[i];
      const bool output = i >= row.num_prompt_tokens;
      if (!repetition && !output) continue;
      auto [it, inserted] = index.emplace(id, static_cast<int32_t>(penalties.size()));
      if (inserted) penalties.push_back({id, 0});
      if (output) ++penalties[it->second].output_count;
    }
  }
  g.penalty_count = static_cast<int32_t>(penalties.size()) - g.penalty_begin;
  g.bias_begin = static_cast<int32_t>(bias_ids.size());
  for (int32_t i = 0; i < row.num_bias; ++i) {
    bias_ids.push_back(row.bias_token_ids[i]);
    bias_values.push_back(row.bias_values[i]);
  }
  g.bias_count = row.num_bias;
  rows.push_back(g);
}

void SamplingBatchPack::Clear() {
  rows.clear();
  penalties.clear();
  bias_ids.clear();
  bias_values.clear();
}

}  // namespace loom::kernels::cuda
