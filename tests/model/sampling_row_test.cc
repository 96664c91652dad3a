// MakeSamplingRow is the one SamplingParams -> kernel row translation both
// executors use: its clamping and its errors are the backends' shared rules.
#include "model/sampling_row.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

struct Fixture {
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  SamplingParams params;
  ScheduledSeq seq;
  Fixture() {
    seq.seq_id = 3;
    seq.all_token_ids = tokens;
    seq.num_prompt_tokens = 3;
    seq.num_computed_tokens = 4;
    seq.num_scheduled_tokens = 1;
    seq.sample = true;
    seq.sampling = &params;
  }
};

TEST(SamplingRowTest, CopiesParamsAndCountsTheTokensGeneratedSoFar) {
  Fixture f;
  f.params.temperature = 0.7f;
  f.params.top_p = 0.9f;
  f.params.top_k = 40;
  f.params.min_p = 0.05f;
  f.params.repetition_penalty = 1.1f;
  f.params.presence_penalty = 0.5f;
  f.params.frequency_penalty = 0.25f;
  f.params.seed = 1234;
  f.params.logit_bias = {{2, -100.0f}, {9, 3.5f}};
  f.params.num_logprobs = 4;
  std::vector<int32_t> ids = {77};
  std::vector<float> values = {1.0f};
  auto row = MakeSamplingRow(f.seq, {.vocab_size = 10}, ids, values);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_FLOAT_EQ(row->temperature, 0.7f);
  EXPECT_FLOAT_EQ(row->top_p, 0.9f);
  EXPECT_EQ(row->top_k, 40);
  EXPECT_FLOAT_EQ(row->min_p, 0.05f);
  EXPECT_FLOAT_EQ(row->repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(row->presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(row->frequency_penalty, 0.25f);
  EXPECT_EQ(row->seed, 1234u);
  EXPECT_EQ(row->num_tokens, 5);
  EXPECT_EQ(row->num_prompt_tokens, 3);
  EXPECT_EQ(row->step, 2u);  // two output tokens so far
  EXPECT_EQ(row->token_ids, f.tokens.data());
  EXPECT_EQ(row->num_logprobs, 4);
  // The bias buffers are replaced, and the row points into them.
  EXPECT_THAT(ids, ::testing::ElementsAre(2, 9));
  EXPECT_THAT(values, ::testing::ElementsAre(-100.0f, 3.5f));
  EXPECT_EQ(row->bias_token_ids, ids.data());
  EXPECT_EQ(row->bias_values, values.data());
  EXPECT_EQ(row->num_bias, 2);
}

TEST(SamplingRowTest, TopLogprobsAreClampedToTheLimitAndNoneStaysNone) {
  Fixture f;
  std::vector<int32_t> ids;
  std::vector<float> values;
  f.params.num_logprobs = 50;
  auto clamped = MakeSamplingRow(f.seq, {.vocab_size = 10, .max_top_logprobs = 20}, ids, values);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(clamped->num_logprobs, 20);
  f.params.num_logprobs = -1;
  auto none = MakeSamplingRow(f.seq, {.vocab_size = 10}, ids, values);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->num_logprobs, -1);
}

TEST(SamplingRowTest, BiasOverTheLimitOrOutsideTheVocabularyIsInvalid) {
  Fixture f;
  std::vector<int32_t> ids;
  std::vector<float> values;
  f.params.logit_bias = {{1, 1.0f}, {2, 1.0f}, {3, 1.0f}};
  auto over = MakeSamplingRow(f.seq, {.vocab_size = 10, .max_logit_bias = 2}, ids, values);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(),
              ::testing::HasSubstr("3 logit_bias entries exceed max_logit_bias (2)"));
  f.params.logit_bias = {{10, 1.0f}};
  auto outside = MakeSamplingRow(f.seq, {.vocab_size = 10}, ids, values);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.status().message(),
              ::testing::HasSubstr("logit_bias token 10 is outside [0, 10)"));
}

}  // namespace
}  // namespace loom
