// Many client threads submitting and aborting at once against a small KV pool
// (so the scheduler preempts): every request ends exactly once, tokens follow
// the script despite preemption, and no block leaks.
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

struct Submitted {
  RequestParams params;
  std::shared_ptr<RecordingSink> sink;
  bool aborted = false;
};

TEST_F(EngineTest, ConcurrentClientsOnASmallPool) {
  EngineConfig config = DefaultConfig();
  config.scheduler.max_num_seqs = 6;
  config.scheduler.max_num_batched_tokens = 16;
  config.scheduler.max_queued_requests = 1000;
  Engine& engine = StartEngine(config, {.num_blocks = 17, .block_size = 4, .max_model_len = 64});

  constexpr int kThreads = 4;
  constexpr int kPerThread = 60;
  std::vector<std::vector<Submitted>> submitted(kThreads);
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      for (int i = 0; i < kPerThread; ++i) {
        Submitted s;
        std::vector<int32_t> prompt(1 + rng() % 8, 100 * (t + 1));
        prompt.back() = 1000 * (t + 1) + 20 * i;
        s.params = Prompt(std::move(prompt), 1 + static_cast<int32_t>(rng() % 16));
        s.params.n = 1 + static_cast<int32_t>(rng() % 3);
        if (rng() % 4 == 0) s.params.stopping.stop = {"<1>"};  // never produced: held, released
        s.sink = std::make_shared<RecordingSink>();
        absl::StatusOr<RequestHandle> handle = engine.Submit(s.params, s.sink);
        ASSERT_TRUE(handle.ok()) << handle.status();
        if (rng() % 3 == 0) {
          engine.Abort(*handle);
          s.aborted = true;
        }
        submitted[t].push_back(std::move(s));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(60)));

  int num_ok = 0;
  for (const std::vector<Submitted>& list : submitted) {
    for (const Submitted& s : list) {
      ASSERT_TRUE(s.sink->WaitFinished(absl::ZeroDuration()));
      const RequestOutput final_output = s.sink->final_output();
      if (!s.aborted) {
        EXPECT_TRUE(final_output.status.ok()) << final_output.status;
      } else {
        // An abort may come after the request already finished.
        EXPECT_TRUE(final_output.status.ok() ||
                    final_output.status.code() == absl::StatusCode::kCancelled);
      }
      if (!final_output.status.ok()) continue;
      ++num_ok;
      const int32_t first = s.params.prompt_token_ids.back() + 1;
      for (uint32_t index = 0; index < static_cast<uint32_t>(s.params.n); ++index) {
        const std::vector<int32_t> tokens = s.sink->Tokens(index);
        ASSERT_EQ(static_cast<int32_t>(tokens.size()), s.params.stopping.max_tokens);
        for (size_t k = 0; k < tokens.size(); ++k) EXPECT_EQ(tokens[k], first + k);
      }
      EXPECT_EQ(final_output.usage.completion_tokens,
                static_cast<uint32_t>(s.params.n * s.params.stopping.max_tokens));
    }
  }
  EXPECT_GT(num_ok, kThreads * kPerThread / 2);
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.num_blocks_used, 0);
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_waiting, 0);
  EXPECT_GT(stats.num_preemptions, 0u);
}

}  // namespace
}  // namespace loom::testing
