// The engine's KV-cache events: they reach the sink after the steps that made
// them, and CachedBlockHashes() lists what they add up to.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "base/mutex.h"
#include "engine/engine.h"
#include "engine/kv_event_sink.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAreArray;

class RecordingKvSink : public KvEventSink {
 public:
  void Publish(std::vector<KvEvent> events) override {
    EXPECT_FALSE(events.empty()) << "the engine hands over no empty batches";
    MutexLock lock(mu_);
    batches_.push_back(std::move(events));
  }

  // The cached set the batches add up to, and how many blocks were stored.
  std::vector<BlockHash> Cached(int* num_stored = nullptr) const {
    MutexLock lock(mu_);
    absl::flat_hash_set<BlockHash> cached;
    int stored = 0;
    for (const std::vector<KvEvent>& batch : batches_) {
      for (const KvEvent& event : batch) {
        for (const BlockHash& hash : event.block_hashes) {
          if (event.kind == KvEvent::Kind::kBlockStored) {
            cached.insert(hash);
            ++stored;
          } else {
            cached.erase(hash);
          }
        }
      }
    }
    if (num_stored != nullptr) *num_stored = stored;
    return {cached.begin(), cached.end()};
  }

 private:
  mutable Mutex mu_;
  std::vector<std::vector<KvEvent>> batches_ ABSL_GUARDED_BY(mu_);
};

TEST_F(EngineTest, KvEventsAddUpToTheListedBlocks) {
  RecordingKvSink sink;
  kv_event_sink_ = &sink;
  Engine& engine = StartEngine();
  // 13 prompt tokens and 6 generated: 4 full blocks of 4 tokens (the last
  // token's slot is never written, so 18 tokens are computed).
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 10};
  auto first = std::make_shared<RecordingSink>();
  SubmitOk(Prompt(prompt, 6), first);
  ASSERT_TRUE(first->WaitFinished());
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  const absl::StatusOr<std::vector<BlockHash>> listed = engine.CachedBlockHashes(absl::Seconds(30));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, SizeIs(4));
  int num_stored = 0;
  EXPECT_THAT(sink.Cached(&num_stored), UnorderedElementsAreArray(*listed));

  // The same prompt again hits its three full prompt blocks: nothing new is
  // stored for them.
  auto second = std::make_shared<RecordingSink>();
  SubmitOk(Prompt(prompt, 1), second);
  ASSERT_TRUE(second->WaitFinished());
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  const absl::StatusOr<std::vector<BlockHash>> again = engine.CachedBlockHashes(absl::Seconds(30));
  ASSERT_TRUE(again.ok()) << again.status();
  int num_stored_again = 0;
  EXPECT_THAT(sink.Cached(&num_stored_again), UnorderedElementsAreArray(*again));
  EXPECT_EQ(num_stored_again, num_stored);
}

TEST_F(EngineTest, ListingWorksWithoutASinkAndStopsWithTheEngine) {
  Engine& engine = StartEngine();
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({1, 2, 3, 4, 5, 6, 7, 8, 10}, 2), sink);
  ASSERT_TRUE(sink->WaitFinished());
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  const absl::StatusOr<std::vector<BlockHash>> listed = engine.CachedBlockHashes(absl::Seconds(30));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, SizeIs(2));
  engine.Shutdown();
  EXPECT_EQ(engine.CachedBlockHashes(absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom::testing
