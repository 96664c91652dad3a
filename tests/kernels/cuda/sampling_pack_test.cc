// Host-side packing of sampling rows for the GPU (no device needed): distinct
// penalised tokens with their output counts, bias ranges and row offsets.
#include <cstddef>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/sampling.h"

namespace loom::kernels::cuda {
namespace {

TEST(SamplingPackTest, RepetitionPenaltyCoversPromptAndOutputOnce) {
  const std::vector<int32_t> tokens = {5, 7, 5, 9, 7, 7, 11};  // prompt: first 3
  SamplingRowParams r;
  r.token_ids = tokens.data();
  r.num_prompt_tokens = 3;
  r.num_tokens = static_cast<int32_t>(tokens.size());
  r.repetition_penalty = 1.2f;
  r.frequency_penalty = 0.5f;
  SamplingBatchPack pack;
  pack.Add(r);
  ASSERT_EQ(pack.rows.size(), 1u);
  EXPECT_EQ(pack.rows[0].penalty_begin, 0);
  ASSERT_EQ(pack.rows[0].penalty_count, 4);
  // First-seen order; counts are output occurrences only.
  const std::vector<std::pair<int32_t, int32_t>> want = {{5, 0}, {7, 2}, {9, 1}, {11, 1}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pack.penalties[i].token_id, want[i].first);
    EXPECT_EQ(pack.penalties[i].output_count, want[i].second);
  }
}

TEST(SamplingPackTest, AdditivePenaltiesSkipPromptOnlyTokens) {
  const std::vector<int32_t> tokens = {1, 2, 3, 2, 4, 4};  // prompt: first 3
  SamplingRowParams r;
  r.token_ids = tokens.data();
  r.num_prompt_tokens = 3;
  r.num_tokens = 6;
  r.presence_penalty = 0.3f;
  SamplingBatchPack pack;
  pack.Add(r);
  ASSERT_EQ(pack.rows[0].penalty_count, 2);
  EXPECT_EQ(pack.penalties[0].token_id, 2);
  EXPECT_EQ(pack.penalties[0].output_count, 1);
  EXPECT_EQ(pack.penalties[1].token_id, 4);
  EXPECT_EQ(pack.penalties[1].output_count, 2);
}

TEST(SamplingPackTest, RowsAppendWithOffsets) {
  const std::vector<int32_t> tokens = {1, 2, 3};
  const std::vector<int32_t> bias_ids = {8, 9};
  const std::vector<float> bias_values = {1.0f, -2.0f};
  SamplingRowParams plain;
  plain.token_ids = tokens.data();
  plain.num_tokens = 3;
  plain.temperature = 0.0f;
  plain.seed = 42;
  plain.step = 7;
  SamplingRowParams biased = plain;
  biased.bias_token_ids = bias_ids.data();
  biased.bias_values = bias_values.data();
  biased.num_bias = 2;
  biased.repetition_penalty = 1.5f;
  SamplingBatchPack pack;
  pack.Add(plain);
  pack.Add(biased);
  ASSERT_EQ(pack.rows.size(), 2u);
  EXPECT_EQ(pack.rows[0].penalty_count, 0);  // no penalties: nothing to walk
  EXPECT_EQ(pack.rows[0].bias_count, 0);
  EXPECT_EQ(pack.rows[0].seed, 42u);
  EXPECT_EQ(pack.rows[0].step, 7u);
  EXPECT_EQ(pack.rows[1].penalty_begin, 0);
  EXPECT_EQ(pack.rows[1].penalty_count, 3);
  EXPECT_EQ(pack.rows[1].bias_begin, 0);
  EXPECT_EQ(pack.rows[1].bias_count, 2);
  EXPECT_EQ(pack.bias_ids, bias_ids);
  EXPECT_EQ(pack.bias_values, bias_values);
  pack.Clear();
  EXPECT_TRUE(pack.rows.empty() && pack.penalties.empty() && pack.bias_ids.empty());
}

// A constrained row uploads its mask words; an unconstrained one nothing.
TEST(SamplingPackTest, OnlyConstrainedRowsCarryMaskWords) {
  const std::vector<uint32_t> mask = {0x5u, 0x0u, 0x80000000u};
  SamplingRowParams plain;
  SamplingRowParams masked;
  masked.allowed_tokens = mask.data();
  masked.allowed_words = 3;
  SamplingBatchPack pack;
  pack.Add(plain);
  pack.Add(masked);
  pack.Add(plain);
  pack.Add(masked);
  ASSERT_EQ(pack.rows.size(), 4u);
  EXPECT_EQ(pack.rows[0].mask_begin, -1);
  EXPECT_EQ(pack.rows[2].mask_begin, -1);
  EXPECT_EQ(pack.rows[1].mask_begin, 0);
  EXPECT_EQ(pack.rows[3].mask_begin, 3);
  EXPECT_EQ(pack.rows[3].mask_words, 3);
  EXPECT_EQ(pack.masks, (std::vector<uint32_t>{0x5u, 0x0u, 0x80000000u, 0x5u, 0x0u, 0x80000000u}));
  pack.Clear();
  EXPECT_TRUE(pack.masks.empty());
}

// The worst step the limits allow: every row with max_history distinct
// penalised tokens and a logit_bias over the whole vocabulary. It fits in
// SamplingUploadBytes after the int32 inputs and every array round-trips.
TEST(SamplingPackTest, WorstCaseStepFitsTheUploadAndRoundTrips) {
  SamplingUploadLimits limits;
  limits.max_rows = 48;
  limits.vocab_size = 128256;
  limits.max_history = 4096;
  limits.max_logit_bias = limits.vocab_size;
  std::vector<int32_t> history(limits.max_history);
  std::iota(history.begin(), history.end(), 0);
  std::vector<int32_t> bias_ids(limits.vocab_size);
  std::iota(bias_ids.begin(), bias_ids.end(), 0);
  std::vector<float> bias_values(bias_ids.size());
  for (size_t i = 0; i < bias_values.size(); ++i)
    bias_values[i] = static_cast<float>(i % 201) - 100;
  const int32_t words = (limits.vocab_size + 31) / 32;
  std::vector<uint32_t> mask(words);
  for (int32_t w = 0; w < words; ++w) mask[w] = 0x9E3779B9u * static_cast<uint32_t>(w + 1);
  SamplingBatchPack pack;
  for (int32_t r = 0; r < limits.max_rows; ++r) {
    SamplingRowParams row;
    row.allowed_tokens = mask.data();
    row.allowed_words = words;
    row.token_ids = history.data();
    row.num_prompt_tokens = 1;
    row.num_tokens = limits.max_history;
    row.repetition_penalty = 1.2f;
    row.presence_penalty = 0.5f;
    row.bias_token_ids = bias_ids.data();
    row.bias_values = bias_values.data();
    row.num_bias = limits.vocab_size;
    row.seed = static_cast<uint64_t>(r);
    pack.Add(row);
  }
  ASSERT_EQ(pack.penalties.size(), size_t{48} * 4096);
  ASSERT_EQ(pack.bias_ids.size(), size_t{48} * 128256);

  const size_t begin = 4 * 1001;  // int32 inputs before the pack, not 16-byte aligned
  const size_t capacity = begin + SamplingUploadBytes(limits);
  // The former sizing: rows, max_history penalties per row and 1 MiB for bias.
  const size_t former =
      48 * sizeof(SamplingRowGpu) + size_t{48} * 4096 * sizeof(PenaltyEntry) + (size_t{1} << 20);
  EXPECT_GT(capacity - begin, former);
  std::vector<std::byte> buffer(capacity);
  absl::StatusOr<SamplingUploadOffsets> at =
      PackSamplingUpload(pack, buffer.data(), begin, capacity);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_LE(at->end, capacity);
  ASSERT_EQ(pack.masks.size(), size_t{48} * words);
  for (size_t off : {at->rows, at->penalties, at->bias_ids, at->bias_values, at->masks}) {
    EXPECT_EQ(off % 16, 0u);
    EXPECT_GE(off, begin);
  }
  std::vector<SamplingRowGpu> rows(pack.rows.size());
  std::memcpy(rows.data(), buffer.data() + at->rows, rows.size() * sizeof(rows[0]));
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].seed, r);
    EXPECT_EQ(rows[r].bias_begin, pack.rows[r].bias_begin);
    EXPECT_EQ(rows[r].penalty_count, 4096);
    EXPECT_EQ(rows[r].mask_begin, static_cast<int32_t>(r) * words);
    EXPECT_EQ(rows[r].mask_words, words);
  }
  std::vector<uint32_t> masks(pack.masks.size());
  std::memcpy(masks.data(), buffer.data() + at->masks, masks.size() * sizeof(uint32_t));
  EXPECT_EQ(masks, pack.masks);
  std::vector<PenaltyEntry> pen(pack.penalties.size());
  std::memcpy(pen.data(), buffer.data() + at->penalties, pen.size() * sizeof(pen[0]));
  for (size_t i = 0; i < pen.size(); ++i) ASSERT_EQ(pen[i].token_id, pack.penalties[i].token_id);
  std::vector<int32_t> ids(pack.bias_ids.size());
  std::memcpy(ids.data(), buffer.data() + at->bias_ids, ids.size() * 4);
  EXPECT_EQ(ids, pack.bias_ids);
  std::vector<float> values(pack.bias_values.size());
  std::memcpy(values.data(), buffer.data() + at->bias_values, values.size() * 4);
  EXPECT_EQ(values, pack.bias_values);

  // One byte short of what it wrote: refused, nothing overrun.
  absl::StatusOr<SamplingUploadOffsets> tight =
      PackSamplingUpload(pack, buffer.data(), begin, at->end - 1);
  EXPECT_EQ(tight.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace loom::kernels::cuda
