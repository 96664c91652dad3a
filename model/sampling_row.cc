#include "model/sampling_row.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace loom {

absl::StatusOr<kernels::SamplingRowParams> MakeSamplingRow(const ScheduledSeq& seq,
                                                           const SamplingRowLimits& limits,
                                                           std::vector<int32_t>& bias_ids,
                                                           std::vector<float>& bias_values) {
  LOOM_CHECK(seq.sampling != nullptr) << "seq " << seq.seq_id;
  const SamplingParams& sp = *seq.sampling;
  if (sp.logit_bias.size() > static_cast<size_t>(std::max(0, limits.max_logit_bias))) {
    return absl::InvalidArgumentError(absl::StrCat("seq ", seq.seq_id, ": ", sp.logit_bias.size(),
                                                   " logit_bias entries exceed max_logit_bias (",
                                                   limits.max_logit_bias, ")"));
  }
  bias_ids.clear();
  bias_values.clear();
  for (const auto& [id, bias] : sp.logit_bias) {
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("seq ", seq.seq_id, ": logit_bias token ", id,
                                                     " is outside [0, ", limits.vocab_size, ")"));
    }
    bias_ids.push_back(id);
    bias_values.push_back(bias);
  }
  // The step ends at the sequence's last known token, the one whose logits
  // are sampled.
  const int32_t end = seq.num_computed_tokens + seq.num_scheduled_tokens;
  kernels::SamplingRowParams r;
  r.temperature = sp.temperature;
  r.top_p = sp.top_p;
  r.top_k = sp.top_k;
  r.min_p = sp.min_p;
  r.repetition_penalty = sp.repetition_penalty;
  r.presence_penalty = sp.presence_penalty;
  r.frequency_penalty = sp.frequency_penalty;
  r.seed = sp.seed;
  r.step = static_cast<uint64_t>(std::max(0, end - seq.num_prompt_tokens));
  r.token_ids = seq.all_token_ids.data();
  r.num_prompt_tokens = seq.num_prompt_tokens;
  r.num_tokens = end;
  r.bias_token_ids = bias_ids.data();
  r.bias_values = bias_values.data();
  r.num_bias = static_cast<int32_t>(bias_ids.size());
  r.num_logprobs = std::min(sp.num_logprobs, limits.max_top_logprobs);
  return r;
}

}  // namespace loom
