// GPU sampling: the recipe of kernels/sampling.h, one block per row. The host
// packs each row's SamplingRowParams into a SamplingRowGpu plus a list of its
// distinct penalised tokens (so that the device never walks a whole history),
// uploads them, and the kernel does penalties, bias, logprobs, top-k/min-p/top-p
// and the seeded Philox draw.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/sampling.h"

namespace loom::kernels::cuda {

struct PenaltyEntry {
  int32_t token_id = 0;
  int32_t output_count = 0;  // occurrences in the output
};

struct SamplingRowGpu {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;
  int32_t penalty_begin = 0;  // into SamplingGpuParams::penalties
  int32_t penalty_count = 0;
  int32_t bias_begin = 0;  // into bias_ids / bias_values
  int32_t bias_count = 0;
  int32_t num_logprobs = -1;
  int32_t mask_begin = -1;  // into SamplingGpuParams::masks; -1: every token allowed
  int32_t mask_words = 0;
};

// Host-side packing of a batch; the vectors are uploaded as they are.
struct SamplingBatchPack {
  std::vector<SamplingRowGpu> rows;
  std::vector<PenaltyEntry> penalties;
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  std::vector<uint32_t> masks;  // the constrained rows' token masks, back to back
  void Add(const SamplingRowParams& row);
  void Clear();
};

// The most a step can pack: max_rows sampled rows, each with up to
// min(max_history, vocab_size) distinct penalised tokens,
// min(max_logit_bias, vocab_size) bias entries and a token mask of
// ceil(vocab_size / 32) words.
struct SamplingUploadLimits {
  int32_t max_rows = 0;
  int32_t vocab_size = 0;
  int32_t max_history = 0;  // tokens of a sequence (max_model_len)
  int32_t max_logit_bias = 0;
};

// Bytes PackSamplingUpload needs at most under these limits.
size_t SamplingUploadBytes(const SamplingUploadLimits& limits);

// Byte offsets, from the start of the destination, of the packed arrays.
struct SamplingUploadOffsets {
  size_t rows = 0, penalties = 0, bias_ids = 0, bias_values = 0, masks = 0;
  size_t end = 0;  // one past the last byte written
};

// Copies the pack's arrays into dst[begin, capacity), each 16-byte aligned;
// RESOURCE_EXHAUSTED when they do not fit.
absl::StatusOr<SamplingUploadOffsets> PackSamplingUpload(const SamplingBatchPack& pack,
                                                         std::byte* dst, size_t begin,
                                                         size_t capacity);

// Device pointers; outputs as in SamplingBatchParams.
struct SamplingGpuParams {
  float* logits = nullptr;  // [num_rows, vocab_size], overwritten
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
  const SamplingRowGpu* rows = nullptr;
  const PenaltyEntry* penalties = nullptr;
  const int32_t* bias_ids = nullptr;
  const float* bias_values = nullptr;
  const uint32_t* masks = nullptr;
  int32_t* out_token_ids = nullptr;
  float* out_logprobs = nullptr;
  int32_t max_top_logprobs = 0;
  int32_t* out_top_ids = nullptr;
  float* out_top_logprobs = nullptr;
};

absl::Status Sample(const SamplingGpuParams& p, cudaStream_t stream);

}  // namespace loom::kernels::cuda
