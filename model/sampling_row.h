// The one translation of a scheduled sequence's SamplingParams into the
// sampling kernels' row (kernels/sampling.h), shared by the CPU sampler and
// the CUDA executor so that both backends sample from identical rows.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sampling.h"
#include "types/sampling_params.h"
#include "types/step.h"

namespace loom {

struct SamplingRowLimits {
  int32_t vocab_size = 0;
  int32_t max_logit_bias = 1024;               // entries per row
  int32_t max_top_logprobs = kMaxTopLogprobs;  // top logprobs per row (num_logprobs is clamped)
};

// The row that samples `seq`'s next token. Its logit_bias goes into
// `bias_ids` and `bias_values` (replaced), which the row points into: they
// must outlive it and stay unchanged. INVALID_ARGUMENT for more logit_bias
// entries than the limit or a biased token outside the vocabulary.
absl::StatusOr<kernels::SamplingRowParams> MakeSamplingRow(const ScheduledSeq& seq,
                                                           const SamplingRowLimits& limits,
                                                           std::vector<int32_t>& bias_ids,
                                                           std::vector<float>& bias_values);

}  // namespace loom
