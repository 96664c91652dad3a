// Turns the logits of the sampling rows of a step into SampledTokens: maps
// each sequence's SamplingParams and token history onto the sampling kernel
// (kernels/sampling.h), seeded per sequence by (seed, tokens generated so far)
// so a draw never depends on the rest of the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/parallel.h"
#include "kernels/sampling.h"
#include "model/sampling_row.h"
#include "types/step.h"

namespace loom {

// Whether a row's token is the largest of its raw logits and nothing else is
// read from them: greedy, no logprobs, no penalty, no logit_bias and no
// token mask (`masked`).
bool NeedsOnlyArgmax(const SamplingParams& params, bool masked);

class Sampler {
 public:
  // seqs[i] owns row i of logits ([seqs.size(), vocab_size], overwritten)
  // and draws only tokens of masks[i] (TokenMasks::RowOf, mask_words words;
  // null: any token); masks is empty when no row is constrained. Top
  // logprobs list allowed tokens only. chosen[i] >= 0 (chosen may be
  // shorter than seqs) is row i's token already, found by the forward pass
  // for a row NeedsOnlyArgmax allowed; its logits are not read.
  // INVALID_ARGUMENT when a row's logit_bias breaks `limits`
  // (MakeSamplingRow).
  absl::StatusOr<std::vector<SampledToken>> Sample(const std::vector<const ScheduledSeq*>& seqs,
                                                   const std::vector<const uint32_t*>& masks,
                                                   int32_t mask_words, std::vector<float>& logits,
                                                   const SamplingRowLimits& limits,
                                                   kernels::ParallelFor& pool,
                                                   const std::vector<int32_t>& chosen = {});

 private:
  std::vector<kernels::SamplingRowParams> rows_;
  std::vector<std::vector<int32_t>> bias_ids_;
  std::vector<std::vector<float>> bias_values_;
  std::vector<int32_t> token_ids_;
  std::vector<float> logprobs_;
  std::vector<int32_t> top_ids_;
  std::vector<float> top_logprobs_;
};

}  // namespace loom
