// The learned step cost (scheduler/step_cost.h) and the step-time target it
// sizes prefill chunks by (SchedulerConfig::max_step_ms).
#include "scheduler/step_cost.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/scheduler_harness.h"

namespace loom::testing {
namespace {

using ::testing::HasSubstr;

// Steps of 1, 40, 80, ... tokens costing fixed + per_token * tokens.
void Feed(StepCost& cost, double fixed, double per_token, int rounds = 2) {
  for (int r = 0; r < rounds; ++r) {
    for (int32_t tokens : {1, 40, 80, 120, 160, 200}) {
      cost.Observe(tokens, fixed + per_token * tokens);
    }
  }
}

TEST(StepCostTest, UnknownUntilStepsOfDifferentSizesAreSeen) {
  StepCost cost;
  EXPECT_FALSE(cost.Known());
  for (int i = 0; i < 20; ++i) cost.Observe(16, 0.3);  // a steady decode batch
  EXPECT_FALSE(cost.Known()) << "one size says nothing about a prompt chunk's cost";
  cost.Observe(100, 1.1);
  cost.Observe(60, 0.7);
  EXPECT_TRUE(cost.Known());
}

TEST(StepCostTest, RecoversTheLineOfExactSteps) {
  StepCost cost;
  Feed(cost, 0.05, 0.002);
  ASSERT_TRUE(cost.Known());
  EXPECT_NEAR(cost.fixed_seconds(), 0.05, 1e-9);
  EXPECT_NEAR(cost.seconds_per_token(), 0.002, 1e-12);
  EXPECT_NEAR(cost.Seconds(100), 0.25, 1e-9);
  EXPECT_EQ(cost.TokensWithin(0.25 + 1e-9), 100);
  EXPECT_EQ(cost.TokensWithin(0.04), 0) << "less than an empty step";
}

TEST(StepCostTest, FollowsTheMachineWhenItChanges) {
  StepCost cost;
  Feed(cost, 0.05, 0.002);
  Feed(cost, 0.02, 0.010, 20);  // a slower machine (or a busier one)
  EXPECT_NEAR(cost.seconds_per_token(), 0.010, 1e-4);
  EXPECT_NEAR(cost.Seconds(100), 1.02, 0.01);
}

TEST(StepCostTest, IgnoresEmptyAndInvalidSteps) {
  StepCost cost;
  Feed(cost, 0.05, 0.002);
  const double before = cost.Seconds(100);
  cost.Observe(0, 5.0);
  cost.Observe(50, -1.0);
  cost.Observe(50, std::numeric_limits<double>::quiet_NaN());
  cost.Observe(50, std::numeric_limits<double>::infinity());
  EXPECT_EQ(cost.Seconds(100), before);
}

TEST(StepCostTest, NoiseNeverMakesATokenCostNothingOrLess) {
  StepCost cost;
  // Larger steps measured faster (a noisy VM): the fitted slope would be
  // negative.
  for (int r = 0; r < 3; ++r) {
    cost.Observe(10, 0.50);
    cost.Observe(100, 0.30);
  }
  ASSERT_TRUE(cost.Known());
  EXPECT_GE(cost.seconds_per_token(), 0.0);
  EXPECT_GE(cost.fixed_seconds(), 0.0);
  EXPECT_GE(cost.Seconds(200), cost.Seconds(10));
}

// Four decodes running, then a 200-token prompt arrives. The plan's entry
// for the prompt ("5.0:0+N").
std::string PromptChunk(SchedulerConfig config, double fixed, double per_token,
                        bool decodes = true) {
  SchedulerHarness::Options options;
  options.scheduler = config;
  options.scheduler.max_num_seqs = 8;
  options.scheduler.max_num_batched_tokens = 256;
  options.scheduler.max_model_len = 256;
  options.cache = {.num_blocks = 128, .block_size = 4, .enable_prefix_caching = false};
  SchedulerHarness h(options);
  for (int r = 0; r < 2; ++r) {
    for (int32_t tokens : {1, 40, 80, 120, 160, 200}) {
      h.scheduler().ObserveStep(tokens, fixed + per_token * tokens);
    }
  }
  if (decodes) {
    for (int i = 0; i < 4; ++i) h.Add(MakeRequest(2, 50, static_cast<uint64_t>(i)));
    h.Step();  // their prompts
  }
  h.Add(MakeRequest(200, 1, 99));
  const std::string plan = h.Step();
  const size_t at = plan.find(decodes ? "5.0:0+" : "1.0:0+");
  EXPECT_NE(at, std::string::npos) << plan;
  if (at == std::string::npos) return plan;
  return plan.substr(at, plan.find(' ', at) - at);
}

TEST(StepTargetTest, PromptChunkFillsTheTargetBesideTheDecodes) {
  SchedulerConfig config;
  config.max_step_ms = 100;  // 10 ms + 1 ms a token: 90 tokens, 4 of them decodes
  EXPECT_EQ(PromptChunk(config, 0.010, 0.001), "5.0:0+86");
  config.max_step_ms = 10;  // less than an empty step: the floor still progresses
  EXPECT_EQ(PromptChunk(config, 0.010, 0.001), "5.0:0+" + std::to_string(kMinPrefillTokensPerStep));
}

TEST(StepTargetTest, NoCapWithoutTargetOrWithoutRunningDecodes) {
  SchedulerConfig config;
  EXPECT_EQ(PromptChunk(config, 0.010, 0.001), "5.0:0+200*") << "no target";
  config.max_step_ms = 100;
  EXPECT_EQ(PromptChunk(config, 0.010, 0.001, /*decodes=*/false), "1.0:0+200*")
      << "no decode to keep waiting";
  config.long_prefill_token_threshold = 64;  // the token cap still applies
  EXPECT_THAT(PromptChunk(config, 0.010, 0.001), HasSubstr("+64"));
}

}  // namespace
}  // namespace loom::testing
