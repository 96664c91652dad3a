// The stream's buffer between writes: deltas that pile up while a write is in
// flight merge into one message per sample; usage rides on the last message.
#include "server/stream_coalescer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using ::testing::ElementsAre;

RequestOutput Step(uint32_t index, int32_t token, std::string text,
                   FinishReason reason = FinishReason::kNone) {
  RequestOutput out;
  SampleDelta& d = out.samples.emplace_back();
  d.index = index;
  d.token_ids = {token};
  d.text = std::move(text);
  d.finish_reason = reason;
  if (reason == FinishReason::kStop) {
    d.stop_reason = "257";
  }
  return out;
}

TEST(StreamCoalescerTest, EachStepIsOneMessageWhenTheClientKeepsUp) {
  StreamCoalescer c("r1");
  c.Add(Step(0, 1, "a"));
  auto m = c.TakeNext();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->request_id(), "r1");
  EXPECT_THAT(m->token_ids(), ElementsAre(1));
  EXPECT_EQ(m->text(), "a");
  EXPECT_FALSE(c.TakeNext().has_value());
  c.Add(Step(0, 2, "b"));
  EXPECT_EQ(c.TakeNext()->text(), "b");
}

TEST(StreamCoalescerTest, DeltasPilingUpDuringAWriteMergeIntoOneMessage) {
  StreamCoalescer c("r");
  c.Add(Step(0, 1, "a"));
  auto in_flight = c.TakeNext();  // the write that is now in flight
  ASSERT_TRUE(in_flight.has_value());
  // Three engine steps arrive before OnWriteDone.
  c.Add(Step(0, 2, "b"));
  c.Add(Step(0, 3, "c"));
  RequestOutput last = Step(0, 4, "d", FinishReason::kStop);
  last.finished = true;
  last.usage.prompt_tokens = 5;
  last.usage.completion_tokens = 4;
  c.Add(std::move(last));
  EXPECT_TRUE(c.finished());
  EXPECT_TRUE(c.final_status().ok());

  auto next = c.TakeNext();
  ASSERT_TRUE(next.has_value());
  EXPECT_THAT(next->token_ids(), ElementsAre(2, 3, 4));
  EXPECT_EQ(next->text(), "bcd");
  EXPECT_EQ(next->finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(next->stop_reason(), "257");
  EXPECT_EQ(next->usage().prompt_tokens(), 5U);
  EXPECT_EQ(next->usage().completion_tokens(), 4U);
  EXPECT_FALSE(c.TakeNext().has_value());
}

TEST(StreamCoalescerTest, PendingBytesFollowTheBacklog) {
  StreamCoalescer c("r1");
  EXPECT_EQ(c.pending_bytes(), 0);
  c.Add(Step(0, 1, std::string(100, 'a')));
  const int64_t one = c.pending_bytes();
  EXPECT_GE(one, 100);
  c.Add(Step(0, 2, std::string(100, 'b')));
  c.Add(Step(1, 3, std::string(50, 'c')));
  EXPECT_EQ(c.pending_bytes(), 2 * one + (one - 50));
  // Taking sample 0's message leaves sample 1's, measured exactly.
  ASSERT_TRUE(c.TakeNext().has_value());
  const int64_t rest = c.pending_bytes();
  EXPECT_GE(rest, 50);
  EXPECT_LT(rest, one);
  c.Clear();
  EXPECT_EQ(c.pending_bytes(), 0);
  EXPECT_FALSE(c.has_pending());
}

TEST(StreamCoalescerTest, SamplesStaySeparate) {
  StreamCoalescer c("r");
  RequestOutput both;
  both.samples.push_back(Step(0, 1, "a").samples[0]);
  both.samples.push_back(Step(1, 7, "x").samples[0]);
  c.Add(both);
  c.Add(Step(1, 8, "y", FinishReason::kLength));
  c.Add(Step(0, 2, "b"));
  auto m0 = c.TakeNext();
  auto m1 = c.TakeNext();
  ASSERT_TRUE(m0.has_value() && m1.has_value());
  EXPECT_EQ(m0->index(), 0U);
  EXPECT_EQ(m0->text(), "ab");
  EXPECT_EQ(m1->index(), 1U);
  EXPECT_EQ(m1->text(), "xy");
  EXPECT_EQ(m1->finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST(StreamCoalescerTest, FinalOutputWithoutSamplesStillCarriesUsage) {
  StreamCoalescer c("r");
  c.Add(Step(0, 1, "a", FinishReason::kLength));
  EXPECT_EQ(c.TakeNext()->finish_reason(), v1::FINISH_REASON_LENGTH);
  RequestOutput final_output;
  final_output.finished = true;
  final_output.usage.completion_tokens = 1;
  c.Add(final_output);
  auto m = c.TakeNext();
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->token_ids().empty());
  EXPECT_EQ(m->usage().completion_tokens(), 1U);
}

TEST(StreamCoalescerTest, ErrorEndsTheStreamAndLaterOutputsAreIgnored) {
  StreamCoalescer c("r");
  RequestOutput aborted;
  aborted.finished = true;
  aborted.status = absl::CancelledError("client cancelled");
  c.Add(aborted);
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.final_status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(c.has_pending());
  c.Add(Step(0, 1, "late"));
  EXPECT_FALSE(c.has_pending());
}

}  // namespace
}  // namespace loom
