// Table-driven scheduling timelines. Each step of a timeline lists the plan as
// "handle.index:num_computed_tokens+num_scheduled_tokens", with '*' when the
// slice samples a token, in plan order (running sequences in key order, then
// the newly admitted ones).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/scheduler_harness.h"

namespace loom::testing {
namespace {

struct Arrival {
  int32_t before_step;  // added just before this step (1-based)
  int32_t prompt_len;
  int32_t max_tokens;
  int32_t priority = 0;
  int32_t n = 1;
};

struct TimelineCase {
  std::string name;
  int32_t max_num_batched_tokens = 16;
  int32_t max_num_seqs = 4;
  int32_t num_blocks = 64;  // block size 4
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  AdmissionPolicy admission = AdmissionPolicy::kOptimistic;
  int32_t long_prefill_token_threshold = 0;
  int32_t max_num_partial_prefills = 0;
  absl::Duration priority_aging = absl::Seconds(1);
  absl::Duration prompt_token_aging = absl::Seconds(1);
  std::vector<Arrival> arrivals;
  std::vector<std::string> timeline;
  int64_t num_preemptions = 0;
};

class TimelineTest : public ::testing::TestWithParam<TimelineCase> {};

TEST_P(TimelineTest, MatchesTimeline) {
  const TimelineCase& c = GetParam();
  SchedulerHarness::Options options;
  options.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
  options.scheduler.max_num_seqs = c.max_num_seqs;
  options.scheduler.max_model_len = 64;
  options.scheduler.policy = c.policy;
  options.scheduler.admission = c.admission;
  options.scheduler.long_prefill_token_threshold = c.long_prefill_token_threshold;
  options.scheduler.priority_aging = c.priority_aging;
  options.scheduler.max_num_partial_prefills = c.max_num_partial_prefills;
  options.scheduler.prompt_token_aging = c.prompt_token_aging;
  options.cache.num_blocks = c.num_blocks;
  SchedulerHarness h(options);

  std::vector<std::string> timeline;
  for (int32_t step = 1; step <= 100; ++step) {
    for (size_t i = 0; i < c.arrivals.size(); ++i) {
      const Arrival& a = c.arrivals[i];
      if (a.before_step != step) {
        continue;
      }
      RequestParams params = MakeRequest(a.prompt_len, a.max_tokens, /*salt=*/i + 1);
      params.priority = a.priority;
      params.n = a.n;
      params.arrival_time = h.now();
      h.Add(std::move(params));
    }
    if (!h.scheduler().HasUnfinished()) {
      break;
    }
    timeline.push_back(h.Step());
  }
  EXPECT_EQ(timeline, c.timeline);
  EXPECT_EQ(h.scheduler().num_preemptions(), c.num_preemptions);
  EXPECT_EQ(h.cache().Stats().num_used, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Scheduling, TimelineTest,
    ::testing::Values(
        // A 10-token prompt under a 4-token budget: three chunks, the last one
        // samples; then one decode reaches max_tokens = 2.
        TimelineCase{.name = "ChunkedPrefill",
                     .max_num_batched_tokens = 4,
                     .arrivals = {{1, 10, 2}},
                     .timeline = {"1.0:0+4", "1.0:4+4", "1.0:8+2*", "1.0:10+1*"}},
        // Budget 6: request 1's whole prompt (3) and the first 3 tokens of
        // request 2. Step 2 mixes request 1's decode with request 2's last
        // chunk; request 2 stops at max_tokens = 1, request 1 at 4.
        TimelineCase{.name = "PrefillAndDecodeShareSteps",
                     .max_num_batched_tokens = 6,
                     .arrivals = {{1, 3, 4}, {1, 8, 1}},
                     .timeline = {"1.0:0+3* 2.0:0+3", "1.0:3+1* 2.0:3+5*", "1.0:4+1*", "1.0:5+1*"}},
        // Priority 0 request 2 arrives after request 1 (priority 1) and goes
        // first in key order, yet its 12-token prefill takes only 3 of the 4
        // tokens so that request 1's decode is never stalled.
        TimelineCase{.name = "PrefillLeavesRoomForDecodes",
                     .max_num_batched_tokens = 4,
                     .policy = SchedulingPolicy::kPriority,
                     .arrivals = {{1, 2, 6, 1}, {2, 12, 1, 0}},
                     .timeline = {"1.0:0+2*", "1.0:2+1* 2.0:0+3", "2.0:3+3 1.0:3+1*",
                                  "2.0:6+3 1.0:4+1*", "2.0:9+3* 1.0:5+1*", "1.0:6+1*"}},
        // Two batch slots: request 3 waits until 1 and 2 finish.
        TimelineCase{
            .name = "MaxNumSeqs",
            .max_num_seqs = 2,
            .arrivals = {{1, 2, 2}, {1, 2, 2}, {1, 2, 2}},
            .timeline = {"1.0:0+2* 2.0:0+2*", "1.0:2+1* 2.0:2+1*", "3.0:0+2*", "3.0:2+1*"}},
        // Prefill chunks capped at 4 tokens even though the budget is 16.
        TimelineCase{.name = "LongPrefillThreshold",
                     .long_prefill_token_threshold = 4,
                     .arrivals = {{1, 10, 1}, {1, 3, 1}},
                     .timeline = {"1.0:0+4 2.0:0+3*", "1.0:4+4", "1.0:8+2*"}},
        // One partial prefill a step, 4-token chunks: request 2's 6-token
        // prompt needs two chunks, so it waits for request 1's last one, and
        // request 3 waits behind it (admission stops at the head); the step
        // that finishes request 1's prompt starts both, since request 3's
        // whole prompt fits its chunk and needs no slot.
        TimelineCase{.name = "OnePartialPrefillPerStep",
                     .long_prefill_token_threshold = 4,
                     .max_num_partial_prefills = 1,
                     .arrivals = {{1, 10, 1}, {1, 6, 1}, {1, 3, 1}},
                     .timeline = {"1.0:0+4", "1.0:4+4", "1.0:8+2* 2.0:0+4 3.0:0+3*", "2.0:4+2*"}},
        // A prompt that fits its chunk takes no slot: a wave of short prompts
        // starts beside a long prompt's partial chunk.
        TimelineCase{.name = "ShortPromptNeedsNoPartialSlot",
                     .long_prefill_token_threshold = 4,
                     .max_num_partial_prefills = 1,
                     .arrivals = {{1, 10, 1}, {1, 3, 1}, {1, 2, 1}},
                     .timeline = {"1.0:0+4 2.0:0+3* 3.0:0+2*", "1.0:4+4", "1.0:8+2*"}},
        // One slot, arrivals at the same time: shortest prompt first.
        TimelineCase{.name = "ShortestPromptFirst",
                     .max_num_seqs = 1,
                     .policy = SchedulingPolicy::kShortestPrompt,
                     .arrivals = {{1, 12, 1}, {1, 2, 1}, {1, 6, 1}},
                     .timeline = {"2.0:0+2*", "3.0:0+6*", "1.0:0+12*"}},
        // Aging: a prompt token is worth 10 ms (a step). Request 2 (12 tokens,
        // t=0) ranks at 120 ms while request 1 holds the one slot: request 3
        // (3 tokens, t=10 ms, rank 40 ms) and request 4 (2 tokens, t=90 ms,
        // rank 110 ms) overtake it, request 5 (2 tokens, t=110 ms, rank 130 ms)
        // does not.
        TimelineCase{
            .name = "ShortestPromptAging",
            .max_num_seqs = 1,
            .policy = SchedulingPolicy::kShortestPrompt,
            .prompt_token_aging = absl::Milliseconds(10),
            .arrivals = {{1, 2, 12}, {1, 12, 1}, {2, 3, 1}, {10, 2, 1}, {12, 2, 1}},
            .timeline = {"1.0:0+2*", "1.0:2+1*", "1.0:3+1*", "1.0:4+1*", "1.0:5+1*", "1.0:6+1*",
                         "1.0:7+1*", "1.0:8+1*", "1.0:9+1*", "1.0:10+1*", "1.0:11+1*", "1.0:12+1*",
                         "3.0:0+3*", "4.0:0+2*", "2.0:0+12*", "5.0:0+2*"}},
        // One slot; lower priority value first regardless of submission order.
        TimelineCase{.name = "PriorityOrder",
                     .max_num_seqs = 1,
                     .policy = SchedulingPolicy::kPriority,
                     .arrivals = {{1, 2, 1, 2}, {1, 2, 1, 0}, {1, 2, 1, 1}},
                     .timeline = {"2.0:0+2*", "3.0:0+2*", "1.0:0+2*"}},
        // Aging: one priority level is worth 20 ms (a step is 10 ms). Request
        // 2 (priority 1, t=0) ranks at 20 ms: behind request 3 (priority 0,
        // t=10 ms) but ahead of request 4 (priority 0, t=30 ms).
        TimelineCase{.name = "PriorityAging",
                     .max_num_seqs = 1,
                     .policy = SchedulingPolicy::kPriority,
                     .priority_aging = absl::Milliseconds(20),
                     .arrivals = {{1, 2, 5, 0}, {1, 2, 1, 1}, {2, 2, 1, 0}, {4, 2, 1, 0}},
                     .timeline = {"1.0:0+2*", "1.0:2+1*", "1.0:3+1*", "1.0:4+1*", "1.0:5+1*",
                                  "3.0:0+2*", "2.0:0+2*", "4.0:0+2*"}},
        // 4 usable blocks of 4 slots. At step 6 request 1 needs a third block:
        // request 2 (latest arrival) is preempted, keeps its 5 tokens, waits
        // for room (its 9 tokens need 3 blocks) and recomputes them at step 9.
        TimelineCase{.name = "PreemptLatestArrival",
                     .max_num_batched_tokens = 32,
                     .num_blocks = 5,
                     .arrivals = {{1, 4, 8}, {1, 4, 8}},
                     .timeline = {"1.0:0+4* 2.0:0+4*", "1.0:4+1* 2.0:4+1*", "1.0:5+1* 2.0:5+1*",
                                  "1.0:6+1* 2.0:6+1*", "1.0:7+1* 2.0:7+1*", "1.0:8+1*", "1.0:9+1*",
                                  "1.0:10+1*", "2.0:0+9*", "2.0:9+1*", "2.0:10+1*"},
                     .num_preemptions = 1},
        // The same under the priority policy: request 1 has priority 1, so it
        // is the victim although it arrived first.
        TimelineCase{.name = "PreemptLowestPriority",
                     .max_num_batched_tokens = 32,
                     .num_blocks = 5,
                     .policy = SchedulingPolicy::kPriority,
                     .arrivals = {{1, 4, 8, 1}, {1, 4, 8, 0}},
                     .timeline = {"2.0:0+4* 1.0:0+4*", "2.0:4+1* 1.0:4+1*", "2.0:5+1* 1.0:5+1*",
                                  "2.0:6+1* 1.0:6+1*", "2.0:7+1* 1.0:7+1*", "2.0:8+1*", "2.0:9+1*",
                                  "2.0:10+1*", "1.0:0+9*", "1.0:9+1*", "1.0:10+1*"},
                     .num_preemptions = 1},
        // Reserve admission on the same pool: each request reserves 3 blocks
        // (4 + 8 tokens), so request 2 waits for request 1 instead of
        // preempting it.
        TimelineCase{
            .name = "ReserveNeverPreempts",
            .max_num_batched_tokens = 32,
            .num_blocks = 5,
            .admission = AdmissionPolicy::kReserve,
            .arrivals = {{1, 4, 8}, {1, 4, 8}},
            .timeline = {"1.0:0+4*", "1.0:4+1*", "1.0:5+1*", "1.0:6+1*", "1.0:7+1*", "1.0:8+1*",
                         "1.0:9+1*", "1.0:10+1*", "2.0:0+4*", "2.0:4+1*", "2.0:5+1*", "2.0:6+1*",
                         "2.0:7+1*", "2.0:8+1*", "2.0:9+1*", "2.0:10+1*"}},
        // n = 3 with 3 slots: sample 0 computes the 9-token prompt; samples 1
        // and 2 share its 2 full blocks and compute token 8 themselves.
        // Request 2 waits for a slot, since request 1 holds 3.
        TimelineCase{
            .name = "SiblingsForkAfterPrompt",
            .max_num_seqs = 3,
            .arrivals = {{1, 9, 2, 0, 3}, {1, 2, 1}},
            .timeline = {"1.0:0+9*", "1.0:9+1* 1.1:8+1* 1.2:8+1*", "1.1:9+1* 1.2:9+1* 2.0:0+2*"}}),
    [](const ::testing::TestParamInfo<TimelineCase>& info) { return info.param.name; });

}  // namespace
}  // namespace loom::testing
