// Stopping through the whole engine: stop strings matched on detokenized text
// across token boundaries (with hold-back), min_tokens, stop token ids and EOS.
// The default script turns prompt {10} into "Hel" "lo" " wor" "ld" "!" ...
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::ElementsAre;

// The text of each output of sample 0, in order.
std::vector<std::string> DeltaTexts(const RecordingSink& sink) {
  std::vector<std::string> texts;
  for (const RequestOutput& output : sink.outputs()) {
    for (const SampleDelta& delta : output.samples) texts.push_back(delta.text);
  }
  return texts;
}

using EngineStoppingTest = EngineTest;

TEST_F(EngineStoppingTest, StopStringAcrossTokensIsHeldBackAndCut) {
  Engine& engine = StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 20);
  params.stopping.stop = {"lo wo"};
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  // "Hel": the final "l" may begin "lo wo", so it is held. "lo": "llo" ends in
  // "lo", still a possible start; one "l" goes out. " wor": "lo wor" contains
  // the stop string, so the text ends before it.
  EXPECT_THAT(DeltaTexts(*sink), ElementsAre("He", "l", ""));
  EXPECT_THAT(sink->Tokens(0), ElementsAre(11, 12, 13));
  const RequestOutput final_output = sink->final_output();
  EXPECT_TRUE(final_output.status.ok());
  EXPECT_EQ(final_output.samples[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(final_output.samples[0].stop_reason, "lo wo");
  EXPECT_EQ(final_output.usage.completion_tokens, 3u);
  // The scheduler was told: the sequence ended and its blocks are free.
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
  EXPECT_EQ(engine.Stats().generation_tokens_total, 3u);
}

TEST_F(EngineStoppingTest, IncludeStopStringInOutput) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 20);
  params.stopping.stop = {"lo wo"};
  params.stopping.include_stop_str_in_output = true;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_THAT(DeltaTexts(*sink), ElementsAre("He", "l", "lo wo"));
  EXPECT_EQ(sink->final_output().samples[0].stop_reason, "lo wo");
}

TEST_F(EngineStoppingTest, HeldTextIsReleasedWhenLengthEndsTheSample) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 2);
  params.stopping.stop = {"lo!"};  // "Hel" and "Hello" both end in a possible start
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  // The last token ends the sample by length, which releases the held "lo".
  EXPECT_THAT(DeltaTexts(*sink), ElementsAre("He", "llo"));
  EXPECT_EQ(sink->final_output().samples[0].finish_reason, FinishReason::kLength);
}

TEST_F(EngineStoppingTest, StopStringIgnoredBeforeMinTokens) {
  StartEngine();
  // "el" is complete after the first token; with min_tokens 2 it is ignored.
  auto early = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 4);
  params.stopping.stop = {"el"};
  SubmitOk(params, early);
  ASSERT_TRUE(early->WaitFinished());
  EXPECT_EQ(early->Text(0), "H");
  EXPECT_EQ(early->final_output().samples[0].stop_reason, "el");

  auto late = std::make_shared<RecordingSink>();
  params.stopping.min_tokens = 2;
  SubmitOk(params, late);
  ASSERT_TRUE(late->WaitFinished());
  EXPECT_EQ(late->Text(0), "Hello world");
  EXPECT_EQ(late->final_output().samples[0].finish_reason, FinishReason::kLength);
}

TEST_F(EngineStoppingTest, StopTokenIdEndsWithoutItsText) {
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 20);
  params.stopping.stop_token_ids = {13};
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_THAT(sink->Tokens(0), ElementsAre(11, 12, 13));
  EXPECT_EQ(sink->Text(0), "Hello");
  EXPECT_EQ(sink->final_output().samples[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(sink->final_output().samples[0].stop_reason, "13");

  auto included = std::make_shared<RecordingSink>();
  params.stopping.include_stop_str_in_output = true;
  SubmitOk(params, included);
  ASSERT_TRUE(included->WaitFinished());
  EXPECT_EQ(included->Text(0), "Hello wor");
}

TEST_F(EngineStoppingTest, EosStopsUnlessIgnored) {
  EngineConfig config = DefaultConfig();
  config.scheduler.eos_token_ids = {14};
  StartEngine(config);
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 6);
  params.stopping.ignore_eos = false;
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_THAT(sink->Tokens(0), ElementsAre(11, 12, 13, 14));
  EXPECT_EQ(sink->Text(0), "Hello wor");
  EXPECT_EQ(sink->final_output().samples[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(sink->final_output().samples[0].stop_reason, "");

  auto ignored = std::make_shared<RecordingSink>();
  params.stopping.ignore_eos = true;
  SubmitOk(params, ignored);
  ASSERT_TRUE(ignored->WaitFinished());
  EXPECT_EQ(ignored->Tokens(0).size(), 6u);
  EXPECT_EQ(ignored->final_output().samples[0].finish_reason, FinishReason::kLength);
}

TEST_F(EngineStoppingTest, SamplesStopIndependently) {
  // Sample i's tokens come from a script keyed by how many tokens it has; the
  // fake cannot tell samples apart, so they share a script but each is
  // matched on its own text and the request ends when the last one does.
  StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 8);
  params.n = 2;
  params.stopping.stop = {"ld!"};
  SubmitOk(params, sink);
  ASSERT_TRUE(sink->WaitFinished());
  for (uint32_t index = 0; index < 2; ++index) {
    EXPECT_EQ(sink->Text(index), "Hello wor") << index;
    EXPECT_THAT(sink->Tokens(index), ElementsAre(11, 12, 13, 14, 15)) << index;
  }
  EXPECT_TRUE(sink->final_output().finished);
  EXPECT_EQ(sink->final_output().usage.completion_tokens, 10u);
}

}  // namespace
}  // namespace loom::testing
