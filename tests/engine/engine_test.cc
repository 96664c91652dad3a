// End-to-end engine tests: requests go through the inbox, the real scheduler
// and cache, a FakeExecutor (step 1 is the warm-up) and a fake detokenizer.
#include "engine/engine.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST_F(EngineTest, StreamsOneDeltaPerStepInOrder) {
  Engine& engine = StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 7), sink);
  ASSERT_TRUE(sink->WaitFinished());

  // Prefill yields 11; each decode step one more token.
  const std::vector<RequestOutput> outputs = sink->outputs();
  ASSERT_EQ(outputs.size(), 7u);
  std::vector<std::string> texts;
  for (size_t i = 0; i < outputs.size(); ++i) {
    ASSERT_EQ(outputs[i].samples.size(), 1u);
    const SampleDelta& delta = outputs[i].samples[0];
    EXPECT_EQ(delta.index, 0u);
    EXPECT_THAT(delta.token_ids, ElementsAre(11 + static_cast<int32_t>(i)));
    EXPECT_TRUE(IsValidUtf8(delta.text)) << i;
    EXPECT_EQ(outputs[i].finished, i + 1 == outputs.size());
    texts.push_back(delta.text);
  }
  // "é" is split over tokens 16 and 17: nothing comes out with 16.
  EXPECT_THAT(texts, ElementsAre("Hel", "lo", " wor", "ld", "!", "", "\xC3\xA9"));

  const RequestOutput final_output = sink->final_output();
  EXPECT_TRUE(final_output.status.ok());
  EXPECT_EQ(final_output.samples[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(final_output.samples[0].stop_reason, "");
  EXPECT_EQ(final_output.usage.prompt_tokens, 1u);
  EXPECT_EQ(final_output.usage.completion_tokens, 7u);

  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.num_blocks_used, 0);
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.generation_tokens_total, 7u);
  EXPECT_EQ(stats.prompt_tokens_total, 1u);
  EXPECT_EQ(stats.num_steps, 7u);
  EXPECT_TRUE(stats.healthy);
}

TEST_F(EngineTest, LogprobsAreCarriedWhenRequested) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 2);
  params.sampling.num_logprobs = 0;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  int num_logprobs = 0;
  for (const RequestOutput& output : sink->outputs()) {
    for (const SampleDelta& delta : output.samples) {
      ASSERT_EQ(delta.logprobs.size(), delta.token_ids.size());
      for (size_t i = 0; i < delta.logprobs.size(); ++i) {
        EXPECT_EQ(delta.logprobs[i].token_id, delta.token_ids[i]);
        EXPECT_FLOAT_EQ(delta.logprobs[i].logprob, -0.5f);
        ++num_logprobs;
      }
    }
  }
  EXPECT_EQ(num_logprobs, 2);
}

// Every prompt token after the first, once, on the first output.
void ExpectAllPromptLogprobs(const RecordingSink& sink, const std::vector<int32_t>& prompt,
                             size_t num_top) {
  const std::vector<RequestOutput> outputs = sink.outputs();
  ASSERT_FALSE(outputs.empty());
  const std::vector<TokenLogprobs>& got = outputs[0].prompt_logprobs;
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token_id, prompt[i + 1]) << i;
    EXPECT_FLOAT_EQ(got[i].logprob, -static_cast<float>(i + 1)) << i;
    EXPECT_EQ(got[i].top.size(), num_top) << i;
  }
  for (size_t i = 1; i < outputs.size(); ++i) EXPECT_TRUE(outputs[i].prompt_logprobs.empty()) << i;
}

TEST_F(EngineTest, PromptLogprobsCoverEveryPositionDespiteAPrefixCacheHit) {
  EngineConfig config = DefaultConfig();
  config.scheduler.max_num_batched_tokens = 8;  // the 14-token prompt comes in chunks
  StartEngine(config);
  const std::vector<int32_t> prompt = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  auto warm = std::make_shared<RecordingSink>();
  SubmitOk(Prompt(prompt, 2), warm);
  ASSERT_TRUE(warm->WaitFinished());
  // The same prompt hits the cache without prompt logprobs...
  auto cached = std::make_shared<RecordingSink>();
  SubmitOk(Prompt(prompt, 2), cached);
  ASSERT_TRUE(cached->WaitFinished());
  EXPECT_GT(cached->final_output().usage.cached_prompt_tokens, 0u);
  EXPECT_TRUE(cached->outputs()[0].prompt_logprobs.empty());

  // ...and is computed whole with them.
  auto scored = std::make_shared<RecordingSink>();
  RequestParams params = Prompt(prompt, 2);
  params.prompt_logprobs = 2;
  SubmitOk(params, scored);
  ASSERT_TRUE(scored->WaitFinished());
  EXPECT_TRUE(scored->final_output().status.ok());
  EXPECT_EQ(scored->final_output().usage.cached_prompt_tokens, 0u);
  EXPECT_THAT(scored->Tokens(0), ElementsAre(17, 18));
  ExpectAllPromptLogprobs(*scored, prompt, 2);
}

TEST_F(EngineTest, PromptLogprobsGoWithSampleZeroOfSeveral) {
  StartEngine();
  const std::vector<int32_t> prompt = {20, 21, 22, 23, 24};
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt(prompt, 3);
  params.n = 3;
  params.prompt_logprobs = 0;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  ExpectAllPromptLogprobs(*sink, prompt, 0);
}

TEST_F(EngineTest, MaxTokensZeroReturnsOnlyThePromptsLogprobs) {
  Engine& engine = StartEngine();
  const std::vector<int32_t> prompt = {30, 31, 32, 33, 34, 35};
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt(prompt, 0);
  params.n = 2;
  params.prompt_logprobs = 1;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  const RequestOutput final_output = sink->final_output();
  EXPECT_TRUE(final_output.status.ok()) << final_output.status;
  ExpectAllPromptLogprobs(*sink, prompt, 1);
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(sink->Tokens(i).empty()) << i;
    EXPECT_EQ(sink->Text(i), "") << i;
  }
  size_t num_finished = 0;
  for (const RequestOutput& output : sink->outputs()) {
    for (const SampleDelta& delta : output.samples) {
      if (delta.finish_reason == FinishReason::kNone) continue;
      EXPECT_EQ(delta.finish_reason, FinishReason::kLength);
      ++num_finished;
    }
  }
  EXPECT_EQ(num_finished, 2u);
  EXPECT_EQ(final_output.usage.completion_tokens, 0u);
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
}

TEST_F(EngineTest, PromptLogprobsAreRefusedWhenTheExecutorCannotScorePrompts) {
  FakeExecutor::Options options;
  options.prompt_logprobs = false;
  Engine& engine = StartEngine(DefaultConfig(), options);
  RequestParams params = Prompt({10, 11}, 2);
  params.prompt_logprobs = 1;
  absl::StatusOr<RequestHandle> handle = engine.Submit(params, std::make_shared<RecordingSink>());
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(handle.status().message()), HasSubstr("prompt_logprobs"));
}

TEST_F(EngineTest, UsageMeasuresQueueAndLatencyOnTheEngineClock) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(2);  // the first real step
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 2);
  params.arrival_time = clock_.Now() - absl::Seconds(3);  // waited 3 s before reaching the engine
  SubmitOk(params, sink);
  executor().WaitUntilPaused();
  clock_.Advance(absl::Seconds(1));  // the prefill step takes 1 s
  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());
  const Usage usage = sink->final_output().usage;
  EXPECT_DOUBLE_EQ(usage.queue_seconds, 3.0);
  EXPECT_DOUBLE_EQ(usage.time_to_first_token_seconds, 4.0);
  EXPECT_DOUBLE_EQ(usage.total_seconds, 4.0);
  EXPECT_EQ(usage.cached_prompt_tokens, 0u);
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_DOUBLE_EQ(engine.Stats().last_step_seconds, 0.0);  // the decode step took no clock time
}

TEST_F(EngineTest, NSamplesAreIndexedAndFinishTogether) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 4);
  params.n = 3;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());

  const std::vector<RequestOutput> outputs = sink->outputs();
  for (size_t i = 0; i + 1 < outputs.size(); ++i) EXPECT_FALSE(outputs[i].finished);
  std::vector<FinishReason> reasons(3, FinishReason::kNone);
  for (const RequestOutput& output : outputs) {
    for (const SampleDelta& delta : output.samples) {
      ASSERT_LT(delta.index, 3u);
      if (delta.finish_reason != FinishReason::kNone) {
        EXPECT_EQ(reasons[delta.index], FinishReason::kNone) << "finished twice";
        reasons[delta.index] = delta.finish_reason;
      }
    }
  }
  EXPECT_THAT(reasons,
              ElementsAre(FinishReason::kLength, FinishReason::kLength, FinishReason::kLength));
  for (uint32_t index = 0; index < 3; ++index) {
    EXPECT_THAT(sink->Tokens(index), ElementsAre(11, 12, 13, 14)) << index;
    EXPECT_EQ(sink->Text(index), "Hello world") << index;
  }
  EXPECT_EQ(sink->final_output().usage.completion_tokens, 12u);
  EXPECT_TRUE(sink->final_output().status.ok());
}

TEST_F(EngineTest, AbortMidStreamCancelsAndFreesBlocks) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(4);  // warm-up, prefill, one decode, then pause
  auto sink = std::make_shared<RecordingSink>();
  const RequestHandle handle = SubmitOk(Prompt({10, 10, 10, 10, 10}, 50), sink);
  executor().WaitUntilPaused();
  EXPECT_GT(engine.Stats().num_blocks_used, 0);
  EXPECT_EQ(engine.Stats().num_running, 1);
  engine.Abort(handle);
  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());

  const RequestOutput final_output = sink->final_output();
  EXPECT_EQ(final_output.status.code(), absl::StatusCode::kCancelled);
  ASSERT_EQ(final_output.samples.size(), 1u);
  EXPECT_EQ(final_output.samples[0].finish_reason, FinishReason::kAborted);
  EXPECT_EQ(sink->Tokens(0).size(), 3u);  // prefill, decode, and the step in flight
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.num_blocks_used, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_EQ(stats.num_running, 0);
  engine.Abort(handle);  // a finished request: ignored
}

TEST_F(EngineTest, AbortBeforeTheEngineSeesTheRequest) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(2);
  auto first = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 3), first);
  executor().WaitUntilPaused();
  // Submit and Abort both wait in the inbox and are taken in order.
  auto second = std::make_shared<RecordingSink>();
  const RequestHandle handle = SubmitOk(Prompt({10}, 3), second);
  engine.Abort(handle);
  executor().Release();
  ASSERT_TRUE(second->WaitFinished());
  EXPECT_EQ(second->final_output().status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(second->Tokens(0).empty());
  ASSERT_TRUE(first->WaitFinished());
  EXPECT_TRUE(first->final_output().status.ok());
}

TEST_F(EngineTest, DeadlinePassedWhileRunning) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(3);
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 50);
  params.deadline = clock_.Now() + absl::Seconds(10);
  SubmitOk(params, sink);
  executor().WaitUntilPaused();
  clock_.Advance(absl::Seconds(11));
  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(sink->Tokens(0).size(), 2u);  // the steps before the deadline passed
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
}

TEST_F(EngineTest, DeadlinePassedBeforeScheduling) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 5);
  params.deadline = clock_.Now() - absl::Milliseconds(1);
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(sink->Tokens(0).empty());
}

TEST_F(EngineTest, FullQueueIsResourceExhausted) {
  EngineConfig config = DefaultConfig();
  config.scheduler.max_num_seqs = 1;
  config.scheduler.max_queued_requests = 2;
  Engine& engine = StartEngine(config);
  executor().PauseAtStep(2);
  auto running = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 3), running);
  executor().WaitUntilPaused();  // running is scheduled, the queue is empty

  std::vector<std::shared_ptr<RecordingSink>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::make_shared<RecordingSink>());
    SubmitOk(Prompt({10}, 3), queued.back());
  }
  auto rejected = std::make_shared<RecordingSink>();
  absl::StatusOr<RequestHandle> handle = engine.Submit(Prompt({10}, 3), rejected);
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(handle.status().message(), HasSubstr("2 queued, max_queued_requests is 2"));

  executor().Release();
  for (auto& sink : queued) {
    ASSERT_TRUE(sink->WaitFinished());
    EXPECT_TRUE(sink->final_output().status.ok());
  }
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_TRUE(rejected->outputs().empty());
  // Room again.
  auto later = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 1), later);
  ASSERT_TRUE(later->WaitFinished());
}

TEST_F(EngineTest, InvalidRequestGetsFinalOutputWithTheSchedulersStatus) {
  Engine& engine = StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({}, 3), sink);  // empty prompt
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
}

TEST_F(EngineTest, ExecutorFailureFailsEveryRequestAndMarksUnhealthy) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(2);
  auto first = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 50), first);
  executor().WaitUntilPaused();
  auto second = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({20}, 50), second);
  executor().FailAtStep(4);
  executor().Release();

  for (auto& sink : {first, second}) {
    ASSERT_TRUE(sink->WaitFinished());
    EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(sink->final_output().status.message(), HasSubstr("fake executor failure"));
  }
  EXPECT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_FALSE(engine.healthy());
  EXPECT_FALSE(engine.Stats().healthy);
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
  auto late = std::make_shared<RecordingSink>();
  EXPECT_EQ(engine.Submit(Prompt({10}, 1), late).status().code(), absl::StatusCode::kInternal);
}

TEST_F(EngineTest, WarmupFailureFailsStart) {
  auto executor = std::make_unique<FakeExecutor>(FakeExecutor::Options{});
  executor->FailAtStep(1);
  Engine engine(DefaultConfig(), std::move(executor), std::make_shared<FakeDetokenizer>(), &clock_);
  const absl::Status status = engine.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("warm-up"));
  EXPECT_FALSE(engine.healthy());
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(engine.Submit(Prompt({10}, 1), sink).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EngineTest, DrainLetsInFlightRequestsComplete) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(3);
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 5), sink);
  executor().WaitUntilPaused();
  engine.StopAccepting();
  auto late = std::make_shared<RecordingSink>();
  const absl::Status rejected = engine.Submit(Prompt({10}, 5), late).status();
  EXPECT_EQ(rejected.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(rejected.message(), HasSubstr("draining"));
  EXPECT_FALSE(engine.WaitUntilIdle(absl::ZeroDuration()));
  executor().Release();
  EXPECT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_TRUE(sink->final_output().finished);
  EXPECT_TRUE(sink->final_output().status.ok());
  EXPECT_EQ(sink->Tokens(0).size(), 5u);
  EXPECT_TRUE(late->outputs().empty());
}

TEST_F(EngineTest, ShutdownEndsRequestsInFlightWithTheGivenStatus) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(2);
  std::vector<std::shared_ptr<RecordingSink>> sinks = {std::make_shared<RecordingSink>()};
  SubmitOk(Prompt({10}, 50), sinks[0]);
  executor().WaitUntilPaused();
  std::thread shutter([&] { engine.Shutdown(absl::UnavailableError("going away")); });
  // Requests submitted until Shutdown takes effect wait in the inbox; each
  // must end with the shutdown status too.
  while (true) {
    auto sink = std::make_shared<RecordingSink>();
    absl::StatusOr<RequestHandle> handle = engine.Submit(Prompt({10}, 50), sink);
    if (handle.status().code() == absl::StatusCode::kResourceExhausted) {
      std::this_thread::yield();  // the queue filled up before Shutdown took effect
      continue;
    }
    if (!handle.ok()) {
      EXPECT_EQ(handle.status().code(), absl::StatusCode::kUnavailable);
      break;
    }
    sinks.push_back(sink);
    std::this_thread::yield();
  }
  executor().Release();
  shutter.join();
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitFinished(absl::ZeroDuration()));
    EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(sink->final_output().status.message(), "going away");
  }
  EXPECT_TRUE(engine.WaitUntilIdle(absl::ZeroDuration()));
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
  engine.Shutdown();  // idempotent
}

TEST_F(EngineTest, SubmitBeforeStartIsUnavailable) {
  Engine engine(DefaultConfig(), std::make_unique<FakeExecutor>(FakeExecutor::Options{}),
                std::make_shared<FakeDetokenizer>(), &clock_);
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(engine.Submit(Prompt({10}, 1), sink).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(engine.WaitUntilIdle(absl::ZeroDuration()));
}

}  // namespace
}  // namespace loom::testing
