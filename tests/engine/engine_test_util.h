// Shared set-up for the engine tests: an engine on a FakeExecutor, a fake
// detokenizer and a manual clock, plus request builders.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/fakes.h"

namespace loom::testing {

// Token id -> text. With the default script a prompt ending in 10 generates
// 11, 12, 13, ...: "Hel" "lo" " wor" "ld" "!" then "é" split over 16 and 17.
inline std::map<int32_t, std::string> TestPieces() {
  return {{11, "Hel"}, {12, "lo"},   {13, " wor"}, {14, "ld"},
          {15, "!"},   {16, "\xC3"}, {17, "\xA9"}, {18, " ok"}};
}

inline RequestParams Prompt(std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestParams params;
  params.prompt_token_ids = std::move(prompt);
  params.stopping.max_tokens = max_tokens;
  params.stopping.ignore_eos = true;
  return params;
}

class EngineTest : public ::testing::Test {
 protected:
  static EngineConfig DefaultConfig() {
    EngineConfig config;
    config.scheduler.max_num_seqs = 8;
    config.scheduler.max_num_batched_tokens = 64;
    config.scheduler.max_queued_requests = 16;
    return config;
  }

  // Builds and starts the engine; executor() controls the fake executor.
  Engine& StartEngine(EngineConfig config = DefaultConfig(), FakeExecutor::Options options = {},
                      TokenScript script = {}) {
    auto executor = std::make_unique<FakeExecutor>(options, std::move(script));
    executor_ = executor.get();
    engine_ = std::make_unique<Engine>(std::move(config), std::move(executor),
                                       std::make_shared<FakeDetokenizer>(TestPieces()), &clock_);
    if (kv_event_sink_ != nullptr) engine_->SetKvEventSink(kv_event_sink_);
    EXPECT_TRUE(engine_->Start().ok());
    return *engine_;
  }

  // A test that fails while the executor is paused must not hang the engine's
  // shutdown.
  void TearDown() override {
    if (executor_ != nullptr) executor_->Release();
  }

  FakeExecutor& executor() { return *executor_; }

  // Submits and expects success.
  RequestHandle SubmitOk(const RequestParams& params, const std::shared_ptr<RecordingSink>& sink) {
    absl::StatusOr<RequestHandle> handle = engine_->Submit(params, sink);
    EXPECT_TRUE(handle.ok()) << handle.status();
    return handle.ok() ? *handle : 0;
  }

  ManualClock clock_;
  KvEventSink* kv_event_sink_ = nullptr;  // given to the engine when set
  std::unique_ptr<Engine> engine_;
  FakeExecutor* executor_ = nullptr;
};

}  // namespace loom::testing
