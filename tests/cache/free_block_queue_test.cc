#include "cache/free_block_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <deque>
#include <random>
#include <vector>

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

TEST(FreeBlockQueueTest, StartsEmpty) {
  FreeBlockQueue queue(4);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.size(), 0);
  EXPECT_THAT(queue.ToVector(), IsEmpty());
  for (BlockId id = 0; id < 4; ++id) {
    EXPECT_FALSE(queue.Contains(id));
  }
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, PushBackThenPopFrontIsFirstInFirstOut) {
  FreeBlockQueue queue(8);
  for (BlockId id : {5, 1, 7, 3}) {
    queue.PushBack(id);
  }
  EXPECT_THAT(queue.ToVector(), ElementsAre(5, 1, 7, 3));
  EXPECT_EQ(queue.PopFront(), 5);
  EXPECT_EQ(queue.PopFront(), 1);
  EXPECT_EQ(queue.size(), 2);
  EXPECT_FALSE(queue.Contains(5));
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, PushFrontIsTakenNext) {
  FreeBlockQueue queue(8);
  queue.PushBack(1);
  queue.PushBack(2);
  queue.PushFront(6);
  EXPECT_THAT(queue.ToVector(), ElementsAre(6, 1, 2));
  EXPECT_EQ(queue.PopFront(), 6);
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, RemoveFromFrontMiddleAndBackKeepsOrder) {
  FreeBlockQueue queue(8);
  for (BlockId id = 0; id < 6; ++id) {
    queue.PushBack(id);
  }
  queue.Remove(3);
  EXPECT_THAT(queue.ToVector(), ElementsAre(0, 1, 2, 4, 5));
  queue.Remove(0);
  queue.Remove(5);
  EXPECT_THAT(queue.ToVector(), ElementsAre(1, 2, 4));
  EXPECT_FALSE(queue.Contains(3));
  queue.CheckInvariants();
  // A removed block can come back, at either end.
  queue.PushBack(3);
  queue.PushFront(0);
  EXPECT_THAT(queue.ToVector(), ElementsAre(0, 1, 2, 4, 3));
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, DrainsToEmptyAndRefills) {
  FreeBlockQueue queue(3);
  queue.PushBack(2);
  queue.Remove(2);
  EXPECT_TRUE(queue.empty());
  queue.PushFront(1);
  EXPECT_THAT(queue.ToVector(), ElementsAre(1));
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, PushFrontWrapsBelowTheFirstSlot) {
  FreeBlockQueue queue(4);
  // The head starts at ring slot 0, so these land at the ring's far end.
  queue.PushFront(1);
  queue.PushFront(2);
  queue.PushBack(3);
  EXPECT_THAT(queue.ToVector(), ElementsAre(2, 1, 3));
  queue.CheckInvariants();
  EXPECT_EQ(queue.PopFront(), 2);
  queue.Remove(1);
  EXPECT_EQ(queue.PopFront(), 3);
  EXPECT_TRUE(queue.empty());
  queue.PushFront(0);
  EXPECT_THAT(queue.ToVector(), ElementsAre(0));
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, RemovedEntriesAreSkippedAndCompactedAway) {
  constexpr int32_t kNumBlocks = 8;
  FreeBlockQueue queue(kNumBlocks);
  for (BlockId id = 0; id < kNumBlocks; ++id) {
    queue.PushBack(id);
  }
  // Cycling a block from the middle to the back leaves one removed entry per
  // round; the ring (16 entries here) fills and compacts many times over.
  const std::vector<BlockId> start = queue.ToVector();
  std::deque<BlockId> model(start.begin(), start.end());
  for (int round = 0; round < 200; ++round) {
    const BlockId id = static_cast<BlockId>((round * 3) % kNumBlocks);
    queue.Remove(id);
    queue.PushBack(id);
    model.erase(std::find(model.begin(), model.end(), id));
    model.push_back(id);
    ASSERT_THAT(queue.ToVector(), ElementsAreArray(model));
    queue.CheckInvariants();
  }
  EXPECT_EQ(queue.size(), kNumBlocks);
  for (BlockId expected : model) {
    EXPECT_EQ(queue.PopFront(), expected);
  }
  EXPECT_TRUE(queue.empty());
  queue.CheckInvariants();
}

TEST(FreeBlockQueueTest, AtOffsetReadsTheRingBehindTheHead) {
  FreeBlockQueue queue(8);
  EXPECT_EQ(queue.AtOffset(0), FreeBlockQueue::kNoBlock);
  for (BlockId id : {4, 6, 2}) {
    queue.PushBack(id);
  }
  EXPECT_EQ(queue.AtOffset(0), 4);
  EXPECT_EQ(queue.AtOffset(2), 2);
  EXPECT_EQ(queue.AtOffset(3), FreeBlockQueue::kNoBlock);
  // A removed entry stays visible until it is skipped.
  queue.Remove(6);
  EXPECT_EQ(queue.AtOffset(1), 6);
  EXPECT_EQ(queue.PopFront(), 4);
  EXPECT_EQ(queue.PopFront(), 2);
  EXPECT_EQ(queue.AtOffset(0), FreeBlockQueue::kNoBlock);
}

// Random pushes at both ends, pops and removals against a plain deque, with
// a small pool so that the ring fills with removed entries and compacts, and
// the head and tail counters run far from where they started.
TEST(FreeBlockQueueTest, MatchesADequeUnderRandomOperations) {
  constexpr int32_t kNumBlocks = 37;
  FreeBlockQueue queue(kNumBlocks);
  std::deque<BlockId> model;
  std::vector<BlockId> outside;
  for (BlockId id = 0; id < kNumBlocks; ++id) {
    outside.push_back(id);
  }
  std::mt19937 rng(20261130);
  for (int op = 0; op < 5000; ++op) {
    // Pops are rare so that removed entries pile up inside the window.
    const uint32_t roll = rng() % 10;
    if (roll < 6 && !outside.empty()) {
      const size_t pick = rng() % outside.size();
      const BlockId id = outside[pick];
      outside.erase(outside.begin() + static_cast<std::ptrdiff_t>(pick));
      if (roll < 4) {
        queue.PushBack(id);
        model.push_back(id);
      } else {
        queue.PushFront(id);
        model.push_front(id);
      }
    } else if (roll == 9 && !model.empty()) {
      ASSERT_EQ(queue.PopFront(), model.front());
      outside.push_back(model.front());
      model.pop_front();
    } else if (!model.empty()) {
      const auto it = model.begin() + static_cast<std::ptrdiff_t>(rng() % model.size());
      queue.Remove(*it);
      outside.push_back(*it);
      model.erase(it);
    }
    ASSERT_EQ(queue.size(), static_cast<int32_t>(model.size()));
    if (op % 16 == 0) {
      ASSERT_THAT(queue.ToVector(), ElementsAreArray(model));
      queue.CheckInvariants();
    }
  }
  for (BlockId id : outside) {
    EXPECT_FALSE(queue.Contains(id));
  }
  for (BlockId id : model) {
    EXPECT_TRUE(queue.Contains(id));
  }
  EXPECT_THAT(queue.ToVector(), ElementsAreArray(model));
  queue.CheckInvariants();
}

TEST(FreeBlockQueueDeathTest, RejectsDoubleInsertAndMissingRemove) {
  FreeBlockQueue queue(4);
  queue.PushBack(1);
  EXPECT_DEATH(queue.PushBack(1), "Contains");
  EXPECT_DEATH(queue.Remove(2), "Contains");
  EXPECT_DEATH(queue.PushBack(4), "id < num_blocks_");
  EXPECT_DEATH(queue.PushFront(-1), "id >= 0");
}

}  // namespace
}  // namespace loom
