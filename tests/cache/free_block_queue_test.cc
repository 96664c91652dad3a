#include "cache/free_block_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace loom {
namespace {

using ::testing::ElementsAre;
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

TEST(FreeBlockQueueDeathTest, RejectsDoubleInsertAndMissingRemove) {
  FreeBlockQueue queue(4);
  queue.PushBack(1);
  EXPECT_DEATH(queue.PushBack(1), "Contains");
  EXPECT_DEATH(queue.Remove(2), "Contains");
  EXPECT_DEATH(queue.PushBack(4), "id < sentinel_");
}

}  // namespace
}  // namespace loom
