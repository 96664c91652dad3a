#include "model/sampler.h"

#include <algorithm>

#include "base/check.h"

namespace loom {

std::vector<SampledToken> Sampler::Sample(const std::vector<const ScheduledSeq*>& seqs,
                                          std::vector<float>& logits, int32_t vocab_size,
                                          kernels::ParallelFor& pool) {
  const int32_t n = static_cast<int32_t>(seqs.size());
  LOOM_CHECK_EQ(logits.size(), static_cast<size_t>(n) * vocab_size);
  rows_.assign(n, kernels::SamplingRowParams{});
  bias_ids_.resize(n);
  bias_values_.resize(n);
  int32_t max_top = 0;
  for (int32_t i = 0; i < n; ++i) {
    const ScheduledSeq& seq = *seqs[i];
    LOOM_CHECK(seq.sampling != nullptr) << "seq " << seq.seq_id;
    const SamplingParams& sp = *seq.sampling;
    kernels::SamplingRowParams& r = rows_[i];
    r.temperature = sp.temperature;
    r.top_p = sp.top_p;
    r.top_k = sp.top_k;
    r.min_p = sp.min_p;
    r.repetition_penalty = sp.repetition_penalty;
    r.presence_penalty = sp.presence_penalty;
    r.frequency_penalty = sp.frequency_penalty;
    r.seed = sp.seed;
    r.token_ids = seq.all_token_ids.data();
    r.num_prompt_tokens = seq.num_prompt_tokens;
    r.num_tokens = static_cast<int32_t>(seq.all_token_ids.size());
    r.step = static_cast<uint64_t>(r.num_tokens - r.num_prompt_tokens);
    bias_ids_[i].clear();
    bias_values_[i].clear();
    for (const auto& [id, bias] : sp.logit_bias) {
      bias_ids_[i].push_back(id);
      bias_values_[i].push_back(bias);
    }
    r.bias_token_ids = bias_ids_[i].data();
    r.bias_values = bias_values_[i].data();
    r.num_bias = static_cast<int32_t>(bias_ids_[i].size());
    r.num_logprobs = sp.num_logprobs;
    max_top = std::max(max_top, sp.num_logprobs);
  }
  token_ids_.resize(n);
  logprobs_.assign(n, 0.0f);
  top_ids_.resize(static_cast<size_t>(n) * max_top);
  top_logprobs_.resize(top_ids_.size());

  kernels::SamplingBatchParams p;
  p.logits = logits.data();
  p.num_rows = n;
  p.vocab_size = vocab_size;
  p.rows = rows_.data();
  p.out_token_ids = token_ids_.data();
  p.out_logprobs = logprobs_.data();
  p.max_top_logprobs = max_top;
  p.out_top_ids = top_ids_.data();
  p.out_top_logprobs = top_logprobs_.data();
  kernels::cpu::Sample(p, pool);

  std::vector<SampledToken> out(n);
  for (int32_t i = 0; i < n; ++i) {
    out[i].seq_id = seqs[i]->seq_id;
    out[i].token_id = token_ids_[i];
    out[i].logprob = logprobs_[i];
    for (int32_t k = 0; k < rows_[i].num_logprobs; ++k) {
      const size_t at = static_cast<size_t>(i) * max_top + k;
      out[i].top.push_back({top_ids_[at], top_logprobs_[at]});
    }
  }
  return out;
}

}  // namespace loom
