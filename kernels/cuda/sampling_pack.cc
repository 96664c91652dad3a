#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
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
  if (row.allowed_tokens != nullptr) {
    g.mask_begin = static_cast<int32_t>(masks.size());
    g.mask_words = row.allowed_words;
    masks.insert(masks.end(), row.allowed_tokens, row.allowed_tokens + row.allowed_words);
  }
  rows.push_back(g);
}

void SamplingBatchPack::Clear() {
  rows.clear();
  penalties.clear();
  bias_ids.clear();
  bias_values.clear();
  masks.clear();
}

namespace {

constexpr size_t kAlign = 16;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t SamplingUploadBytes(const SamplingUploadLimits& l) {
  const auto rows = static_cast<size_t>(std::max(l.max_rows, 0));
  const auto history = static_cast<size_t>(std::clamp(l.max_history, 0, l.vocab_size));
  const auto bias = static_cast<size_t>(std::clamp(l.max_logit_bias, 0, l.vocab_size));
  const auto mask_words = static_cast<size_t>((std::max(l.vocab_size, 0) + 31) / 32);
  return AlignUp(rows * sizeof(SamplingRowGpu)) + AlignUp(rows * history * sizeof(PenaltyEntry)) +
         AlignUp(rows * bias * sizeof(int32_t)) + AlignUp(rows * bias * sizeof(float)) +
         AlignUp(rows * mask_words * sizeof(uint32_t)) + kAlign;
}

absl::StatusOr<SamplingUploadOffsets> PackSamplingUpload(const SamplingBatchPack& pack,
                                                         std::byte* dst, size_t begin,
                                                         size_t capacity) {
  size_t off = begin;
  bool fits = true;
  auto put = [&](const auto& v) {
    off = AlignUp(off);
    const size_t at = off, n = v.size() * sizeof(v[0]);
    if (!fits || off + n > capacity) {
      fits = false;
      return at;
    }
    if (n > 0) std::memcpy(dst + off, v.data(), n);
    off += n;
    return at;
  };
  SamplingUploadOffsets o;
  o.rows = put(pack.rows);
  o.penalties = put(pack.penalties);
  o.bias_ids = put(pack.bias_ids);
  o.bias_values = put(pack.bias_values);
  o.masks = put(pack.masks);
  o.end = off;
  if (!fits) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sampling inputs of ", pack.rows.size(), " rows, ", pack.penalties.size(),
        " penalised tokens, ", pack.bias_ids.size(), " bias entries and ", pack.masks.size(),
        " mask words exceed the ", capacity - begin, "-byte upload buffer"));
  }
  return o;
}

}  // namespace loom::kernels::cuda
