#include "model/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/status_macros.h"

namespace loom {

bool NeedsOnlyArgmax(const SamplingParams& params, bool masked) {
  return kernels::IsGreedyTemperature(params.temperature) && params.num_logprobs < 0 &&
         params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
         params.frequency_penalty == 0.0f && params.logit_bias.empty() && !masked;
}

absl::StatusOr<std::vector<SampledToken>> Sampler::Sample(
    const std::vector<const ScheduledSeq*>& seqs, const std::vector<const uint32_t*>& masks,
    int32_t mask_words, std::vector<float>& logits, const SamplingRowLimits& limits,
    kernels::ParallelFor& pool, const std::vector<int32_t>& chosen) {
  const int32_t n = static_cast<int32_t>(seqs.size());
  const int32_t vocab_size = limits.vocab_size;
  LOOM_CHECK_EQ(logits.size(), static_cast<size_t>(n) * vocab_size);
  rows_.resize(n);
  bias_ids_.resize(n);
  bias_values_.resize(n);
  int32_t max_top = 0;
  for (int32_t i = 0; i < n; ++i) {
    LOOM_ASSIGN_OR_RETURN(rows_[i],
                          MakeSamplingRow(*seqs[i], limits, bias_ids_[i], bias_values_[i]));
    if (!masks.empty() && masks[i] != nullptr) {
      rows_[i].allowed_tokens = masks[i];
      rows_[i].allowed_words = mask_words;
    }
    if (static_cast<size_t>(i) < chosen.size() && chosen[i] >= 0) {
      LOOM_CHECK(NeedsOnlyArgmax(*seqs[i]->sampling, rows_[i].allowed_tokens != nullptr))
          << "seq " << seqs[i]->seq_id;
      rows_[i].chosen_token = chosen[i];
    }
    max_top = std::max(max_top, rows_[i].num_logprobs);
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
      // Masked-out tokens (-inf) are not alternatives.
      if (std::isinf(top_logprobs_[at]) && top_logprobs_[at] < 0) break;
      out[i].top.push_back({top_ids_[at], top_logprobs_[at]});
    }
  }
  return out;
}

}  // namespace loom
