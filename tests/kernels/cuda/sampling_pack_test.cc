// Host-side packing of sampling rows for the GPU (no device needed): distinct
// penalised tokens with their output counts, bias ranges and row offsets.
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

}  // namespace
}  // namespace loom::kernels::cuda
