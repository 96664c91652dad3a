// Request lifecycle and stopping rules: validation, queue limits, deadlines,
// aborts in every state, token-based stops, n > 1 samples and logprobs.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/stop_checker.h"
#include "tests/scheduler/scheduler_harness.h"

namespace loom::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SchedulerHarness::Options DefaultOptions() {
  SchedulerHarness::Options options;
  options.scheduler.max_num_batched_tokens = 32;
  options.scheduler.max_num_seqs = 8;
  options.scheduler.max_model_len = 64;
  options.scheduler.eos_token_ids = {kFakeEosToken};
  return options;
}

int32_t AlwaysEos(std::span<const int32_t> /*tokens*/, const SamplingParams& /*sampling*/) {
  return kFakeEosToken;
}

// Token 100 + the sequence's length, so output k (0-based) of a P-token
// prompt is 100 + P + k.
int32_t CountingToken(std::span<const int32_t> tokens, const SamplingParams& /*sampling*/) {
  return 100 + static_cast<int32_t>(tokens.size());
}

TEST(AddRequestTest, RejectsInvalidRequests) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_model_len = 16;
  SchedulerHarness h(options);
  Scheduler& s = h.scheduler();

  EXPECT_EQ(s.AddRequest(MakeRequest(0, 4)).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status too_long = s.AddRequest(MakeRequest(16, 4)).status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.message()),
              HasSubstr("prompt has 16 tokens; max_model_len is 16"));
  EXPECT_TRUE(s.AddRequest(MakeRequest(15, 4)).ok());

  RequestParams n0 = MakeRequest(4, 4);
  n0.n = 0;
  EXPECT_EQ(s.AddRequest(n0).status().code(), absl::StatusCode::kInvalidArgument);
  RequestParams n9 = MakeRequest(4, 4);
  n9.n = 9;  // more than max_num_seqs
  EXPECT_EQ(s.AddRequest(n9).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.AddRequest(MakeRequest(4, 0)).status().code(), absl::StatusCode::kInvalidArgument);
  RequestParams min_over_max = MakeRequest(4, 4);
  min_over_max.stopping.min_tokens = 5;
  EXPECT_EQ(s.AddRequest(min_over_max).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AddRequestTest, MaxModelLenIsCappedToThePool) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_model_len = 1000;
  options.cache.num_blocks = 9;  // 8 usable blocks of 4 tokens
  SchedulerHarness h(options);
  EXPECT_EQ(h.scheduler().max_model_len(), 32);
  EXPECT_EQ(h.scheduler().AddRequest(MakeRequest(32, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AddRequestTest, ReserveRejectsWhatCanNeverFit) {
  SchedulerHarness::Options options = DefaultOptions();
  options.cache.num_blocks = 9;  // 8 usable blocks
  options.scheduler.admission = AdmissionPolicy::kReserve;
  SchedulerHarness h(options);
  RequestParams two = MakeRequest(8, 10);  // 18 tokens: 5 blocks per sample
  two.n = 2;
  EXPECT_EQ(h.scheduler().AddRequest(two).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(h.scheduler().AddRequest(MakeRequest(8, 10)).ok());
}

TEST(AddRequestTest, QueueFullIsResourceExhaustedUntilRoomIsMade) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_num_seqs = 1;
  options.scheduler.max_queued_requests = 2;
  SchedulerHarness h(options);
  h.Add(MakeRequest(4, 3));
  h.Add(MakeRequest(4, 3));
  const absl::StatusOr<RequestHandle> third = h.scheduler().AddRequest(MakeRequest(4, 3));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("holds 2 requests; the limit is 2"));
  h.Step();  // admits one: one waiting left
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  EXPECT_EQ(h.scheduler().num_running(), 1);
  const RequestHandle fourth = h.Add(MakeRequest(4, 3));
  EXPECT_NE(fourth, 0U);
  h.Run();
  EXPECT_EQ(h.tokens(fourth).size(), 3U);
}

TEST(StoppingTest, EosStopsWithoutStopReason) {
  SchedulerHarness::Options options = DefaultOptions();
  options.token_fn = AlwaysEos;
  SchedulerHarness h(options);
  const RequestHandle r = h.Add(MakeRequest(4, 10));
  h.Run();
  EXPECT_THAT(h.tokens(r), ElementsAre(kFakeEosToken));
  EXPECT_EQ(h.reason(r), FinishReason::kStop);
  EXPECT_EQ(h.outputs(r)[0].stop_reason, "");
}

TEST(StoppingTest, MinTokensHoldsBackEos) {
  SchedulerHarness::Options options = DefaultOptions();
  options.token_fn = AlwaysEos;
  SchedulerHarness h(options);
  RequestParams params = MakeRequest(4, 10);
  params.stopping.min_tokens = 3;
  const RequestHandle r = h.Add(params);
  h.Run();
  EXPECT_EQ(h.tokens(r).size(), 3U);
  EXPECT_EQ(h.reason(r), FinishReason::kStop);
}

TEST(StoppingTest, IgnoreEosRunsToMaxTokens) {
  SchedulerHarness::Options options = DefaultOptions();
  options.token_fn = AlwaysEos;
  SchedulerHarness h(options);
  RequestParams params = MakeRequest(4, 5);
  params.stopping.ignore_eos = true;
  const RequestHandle r = h.Add(params);
  h.Run();
  EXPECT_EQ(h.tokens(r).size(), 5U);
  EXPECT_EQ(h.reason(r), FinishReason::kLength);
}

TEST(StoppingTest, StopTokenIdsReportTheToken) {
  SchedulerHarness::Options options = DefaultOptions();
  options.token_fn = CountingToken;
  SchedulerHarness h(options);
  RequestParams params = MakeRequest(4, 10);
  params.stopping.stop_token_ids = {106};  // the third output: 100 + 4 + 2
  const RequestHandle r = h.Add(params);
  h.Run();
  EXPECT_THAT(h.tokens(r), ElementsAre(104, 105, 106));
  EXPECT_EQ(h.reason(r), FinishReason::kStop);
  EXPECT_EQ(h.outputs(r)[0].stop_reason, "106");
}

TEST(StoppingTest, MinTokensHoldsBackStopTokens) {
  SchedulerHarness::Options options = DefaultOptions();
  options.token_fn = CountingToken;
  SchedulerHarness h(options);
  RequestParams params = MakeRequest(4, 10);
  params.stopping.stop_token_ids = {104, 107};
  params.stopping.min_tokens = 2;
  const RequestHandle r = h.Add(params);
  h.Run();
  EXPECT_THAT(h.tokens(r), ElementsAre(104, 105, 106, 107));
  EXPECT_EQ(h.outputs(r)[0].stop_reason, "107");
}

TEST(StoppingTest, MaxModelLenEndsWithLength) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_model_len = 8;
  SchedulerHarness h(options);
  const RequestHandle r = h.Add(MakeRequest(6, 100));
  h.Run();
  EXPECT_EQ(h.tokens(r).size(), 2U);
  EXPECT_EQ(h.reason(r), FinishReason::kLength);
}

TEST(StoppingTest, StopBeatsLengthOnTheSameToken) {
  std::string reason;
  StoppingParams stopping;
  stopping.max_tokens = 1;
  const std::vector<int32_t> tokens = {5, 6, kFakeEosToken};
  const std::vector<int32_t> eos = {kFakeEosToken};
  EXPECT_EQ(CheckStop(tokens, 2, StopRules::From(stopping), eos, 64, &reason), FinishReason::kStop);
  stopping.ignore_eos = true;
  EXPECT_EQ(CheckStop(tokens, 2, StopRules::From(stopping), eos, 64, &reason),
            FinishReason::kLength);
  stopping.max_tokens = 2;
  EXPECT_EQ(CheckStop(tokens, 2, StopRules::From(stopping), eos, 64, &reason), FinishReason::kNone);
  EXPECT_EQ(CheckStop(tokens, 2, StopRules::From(stopping), eos, 3, &reason),
            FinishReason::kLength);
}

TEST(DeadlineTest, ExpiredRequestsAreDroppedBeforeMoreCompute) {
  SchedulerHarness h(DefaultOptions());  // 10 ms per step
  RequestParams running = MakeRequest(4, 50);
  running.deadline = h.now() + absl::Milliseconds(25);
  const RequestHandle r1 = h.Add(running);
  RequestParams queued = MakeRequest(4, 50, 2);
  queued.deadline = h.now() + absl::Milliseconds(30);
  queued.priority = 0;
  const RequestHandle r2 = h.Add(queued);
  const RequestHandle r3 = h.Add(MakeRequest(4, 5, 3));
  h.scheduler().AbortRequest(r2);  // an aborted request never expires
  // Steps at 0, 10 and 20 ms compute r1; the Schedule at 30 ms drops it.
  h.Step();
  h.Step();
  h.Step();
  EXPECT_TRUE(h.expired.empty());
  h.Step();
  EXPECT_THAT(h.expired, ElementsAre(r1));
  EXPECT_EQ(h.tokens(r1).size(), 3U);
  h.Run();
  EXPECT_THAT(h.expired, ElementsAre(r1));
  EXPECT_TRUE(h.tokens(r2).empty());
  EXPECT_EQ(h.tokens(r3).size(), 5U);
  EXPECT_EQ(h.cache().Stats().num_used, 0);
}

TEST(DeadlineTest, EarliestDeadlineAndDeadlineOfFollowTheUnfinishedRequests) {
  SchedulerHarness h(DefaultOptions());
  EXPECT_EQ(h.scheduler().EarliestDeadline(), absl::InfiniteFuture());
  RequestParams later = MakeRequest(4, 50);
  later.deadline = h.now() + absl::Milliseconds(40);
  const RequestHandle r1 = h.Add(later);
  RequestParams sooner = MakeRequest(4, 50, 2);
  sooner.deadline = h.now() + absl::Milliseconds(20);
  const RequestHandle r2 = h.Add(sooner);
  const RequestHandle r3 = h.Add(MakeRequest(4, 50, 3));
  EXPECT_EQ(h.scheduler().EarliestDeadline(), sooner.deadline);
  EXPECT_EQ(h.scheduler().DeadlineOf(r1), later.deadline);
  EXPECT_EQ(h.scheduler().DeadlineOf(r3), absl::InfiniteFuture());
  h.scheduler().AbortRequest(r2);
  EXPECT_EQ(h.scheduler().EarliestDeadline(), later.deadline);
  EXPECT_EQ(h.scheduler().DeadlineOf(r2), absl::InfiniteFuture()) << "no longer known";
  h.scheduler().AbortRequest(r1);
  EXPECT_EQ(h.scheduler().EarliestDeadline(), absl::InfiniteFuture());
}

TEST(DeadlineTest, WaitingRequestExpiresWithoutBeingScheduled) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_num_seqs = 1;
  SchedulerHarness h(options);
  const RequestHandle r1 = h.Add(MakeRequest(4, 5));
  RequestParams waiting = MakeRequest(4, 5, 2);
  waiting.deadline = h.now() + absl::Milliseconds(10);  // <= now at the second step
  const RequestHandle r2 = h.Add(waiting);
  h.Run();
  EXPECT_THAT(h.expired, ElementsAre(r2));
  EXPECT_TRUE(h.tokens(r2).empty());
  EXPECT_EQ(h.tokens(r1).size(), 5U);
  ASSERT_EQ(h.started.size(), 1U);
  EXPECT_EQ(h.started[0].handle, r1);
}

TEST(AbortTest, AbortInEveryStateFreesEverything) {
  SchedulerHarness::Options options = DefaultOptions();
  options.scheduler.max_num_seqs = 3;
  options.scheduler.max_num_batched_tokens = 8;
  SchedulerHarness h(options);
  RequestParams siblings = MakeRequest(12, 20);  // prompt in 2 steps, 2 pending samples
  siblings.n = 3;
  const RequestHandle pending = h.Add(siblings);
  const RequestHandle waiting = h.Add(MakeRequest(4, 20, 2));
  h.Step();
  EXPECT_EQ(h.scheduler().num_running(), 1);
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  h.scheduler().AbortRequest(waiting);
  h.scheduler().AbortRequest(pending);  // sample 0 mid-prefill, 1 and 2 pending
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  EXPECT_FALSE(h.scheduler().HasUnfinished());
  EXPECT_EQ(h.cache().Stats().num_used, 0);
  h.scheduler().AbortRequest(pending);  // unknown now: a no-op
  h.scheduler().FinishSeq(pending, 0, FinishReason::kStop);

  const RequestHandle running = h.Add(MakeRequest(4, 20, 3));
  h.Step();
  h.Step();
  h.scheduler().AbortRequest(running);
  EXPECT_EQ(h.cache().Stats().num_used, 0);
  EXPECT_EQ(h.tokens(running).size(), 2U);
  EXPECT_EQ(h.Step(), "");  // nothing left to plan
}

TEST(AbortTest, AbortWhileAPlanIsInFlightTakesEffectAtUpdate) {
  SchedulerHarness h(DefaultOptions());
  const RequestHandle r1 = h.Add(MakeRequest(4, 10));
  const RequestHandle r2 = h.Add(MakeRequest(4, 10, 2));
  h.Step();
  h.set_on_plan([&](const StepPlan& plan) {
    EXPECT_EQ(plan.seqs.size(), 2U);
    h.scheduler().AbortRequest(r1);
    h.scheduler().FinishSeq(r2, 0, FinishReason::kStop);
    EXPECT_EQ(h.scheduler().num_running(), 2);  // the plan's spans stay valid
  });
  h.Step();
  EXPECT_EQ(h.tokens(r1).size(), 1U);  // nothing reported for the aborted step
  EXPECT_EQ(h.tokens(r2).size(), 1U);
  EXPECT_FALSE(h.scheduler().HasUnfinished());
  EXPECT_EQ(h.cache().Stats().num_used, 0);
}

TEST(PreemptionTest, ResumedRequestsProduceIdenticalTokens) {
  std::vector<std::vector<int32_t>> runs[2];
  for (int32_t num_blocks : {5, 64}) {  // 4 usable blocks force preemption
    SchedulerHarness::Options options = DefaultOptions();
    options.scheduler.max_model_len = 16;
    options.cache.num_blocks = num_blocks;
    SchedulerHarness h(options);
    std::vector<RequestHandle> handles;
    for (uint64_t salt = 1; salt <= 3; ++salt) {
      handles.push_back(h.Add(MakeRequest(4, 10, salt)));
    }
    h.Run();
    EXPECT_EQ(h.scheduler().num_preemptions() > 0, num_blocks == 5);
    for (RequestHandle handle : handles) {
      EXPECT_EQ(h.reason(handle), FinishReason::kLength);
      runs[num_blocks == 5 ? 0 : 1].push_back(h.tokens(handle));
    }
    EXPECT_EQ(h.cache().Stats().num_used, 0);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(SiblingTest, SamplesShareThePromptBlocksAndMatchSingleRuns) {
  SchedulerHarness h(DefaultOptions());
  RequestParams params = MakeRequest(9, 6, 7);
  params.n = 3;
  const RequestHandle r = h.Add(params);
  h.Step();  // sample 0 computes the prompt; 1 and 2 fork its 2 full blocks
  const int64_t parent = static_cast<int64_t>(r) * kMaxSamplesPerRequest;
  const std::span<const BlockId> parent_table = h.cache().BlockTable(parent);
  for (int64_t i = 1; i < 3; ++i) {
    const std::span<const BlockId> child = h.cache().BlockTable(parent + i);
    ASSERT_EQ(child.size(), 2U);
    EXPECT_EQ(child[0], parent_table[0]);
    EXPECT_EQ(child[1], parent_table[1]);
  }
  h.Run();

  SchedulerHarness single(DefaultOptions());
  for (uint32_t i = 0; i < 3; ++i) {
    RequestParams alone = MakeRequest(9, 6, 7);
    alone.sampling.seed = DeriveSampleSeed(7, i);
    const RequestHandle s = single.Add(alone);
    single.Run();
    EXPECT_EQ(h.tokens(r, i), single.tokens(s)) << "sample " << i;
    EXPECT_EQ(h.reason(r, i), FinishReason::kLength);
  }
  EXPECT_NE(h.tokens(r, 0), h.tokens(r, 1));
  EXPECT_NE(h.tokens(r, 1), h.tokens(r, 2));
  EXPECT_EQ(h.cache().Stats().num_used, 0);
  ASSERT_FALSE(h.finished.empty());
  EXPECT_TRUE(h.finished.back().request_finished);
  EXPECT_EQ(std::count_if(h.finished.begin(), h.finished.end(),
                          [](const FinishedSeq& f) { return f.request_finished; }),
            1);
}

TEST(SiblingTest, FinishingOneSampleLeavesTheOthers) {
  SchedulerHarness h(DefaultOptions());
  RequestParams params = MakeRequest(5, 4);
  params.n = 2;
  const RequestHandle r = h.Add(params);
  h.Step();
  h.Step();
  h.scheduler().FinishSeq(r, 1, FinishReason::kStop);  // a stop string matched
  EXPECT_EQ(h.scheduler().num_running(), 1);
  h.Run();
  EXPECT_EQ(h.tokens(r, 0).size(), 4U);
  EXPECT_EQ(h.tokens(r, 1).size(), 1U);
  EXPECT_EQ(h.cache().Stats().num_used, 0);
}

TEST(OutputTest, LogprobsAndStartFactsAreCarried) {
  SchedulerHarness::Options options = DefaultOptions();
  options.cache.enable_prefix_caching = true;
  SchedulerHarness h(options);
  RequestParams first = MakeRequest(9, 2, 5);
  first.sampling.num_logprobs = 2;
  const RequestHandle r1 = h.Add(first);
  h.Run();
  const absl::Time second_start = h.now();
  const RequestHandle r2 = h.Add(MakeRequest(9, 2, 5));  // same prompt: 2 cached blocks
  h.Run();

  const SampleOutput& out = h.outputs(r1)[0];
  ASSERT_EQ(out.tokens.size(), 2U);
  EXPECT_FLOAT_EQ(out.logprobs[0], -static_cast<float>(out.tokens[0] % 8) / 4);
  EXPECT_THAT(out.num_top, ElementsAre(2U, 2U));
  EXPECT_THAT(h.outputs(r2)[0].num_top, ElementsAre(0U, 0U));
  ASSERT_EQ(h.started.size(), 2U);
  EXPECT_EQ(h.started[0].handle, r1);
  EXPECT_EQ(h.started[0].num_cached_prompt_tokens, 0);
  EXPECT_EQ(h.started[1].handle, r2);
  EXPECT_EQ(h.started[1].num_cached_prompt_tokens, 8);
  EXPECT_EQ(h.started[1].scheduled_time, second_start);
  EXPECT_EQ(h.tokens(r1), h.tokens(r2));
}

TEST(OutputTest, BlocksFilledByDecodesAreCached) {
  SchedulerHarness::Options options = DefaultOptions();
  options.cache.enable_prefix_caching = true;
  SchedulerHarness h(options);
  // Prompt 6 + 4 outputs: block 1 (positions 4..7) is filled by decodes.
  RequestParams first = MakeRequest(6, 4, 5);
  const RequestHandle r1 = h.Add(first);
  h.Run();
  RequestParams second = MakeRequest(6, 1, 5);
  const std::vector<int32_t> out = h.tokens(r1);
  second.prompt_token_ids.insert(second.prompt_token_ids.end(), out.begin(), out.begin() + 3);
  const RequestHandle r2 = h.Add(second);  // 9 tokens: 2 full blocks cached
  h.Run();
  ASSERT_EQ(h.started.size(), 2U);
  EXPECT_EQ(h.started[1].handle, r2);
  EXPECT_EQ(h.started[1].num_cached_prompt_tokens, 8);
}

}  // namespace
}  // namespace loom::testing
