#include "cache/block_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

BlockHash Hash(uint64_t n) { return BlockHash{.lo = n, .hi = ~n}; }

std::vector<BlockId> Take(BlockPool& pool, int32_t n) {
  std::vector<BlockId> ids;
  pool.Allocate(n, &ids);
  return ids;
}

TEST(BlockPoolTest, NullBlockIsNeverFree) {
  BlockPool pool(5, /*enable_caching=*/true);
  EXPECT_EQ(pool.num_blocks(), 5);
  EXPECT_EQ(pool.NumFreeBlocks(), 4);
  EXPECT_EQ(pool.NumUsedBlocks(), 0);
  EXPECT_THAT(pool.FreeBlocksInEvictionOrder(), ElementsAre(1, 2, 3, 4));
  pool.CheckInvariants();
}

TEST(BlockPoolTest, AllocateTakesFromTheFrontWithOneReference) {
  BlockPool pool(5, true);
  EXPECT_THAT(Take(pool, 3), ElementsAre(1, 2, 3));
  EXPECT_EQ(pool.ref_cnt(2), 1);
  EXPECT_EQ(pool.NumFreeBlocks(), 1);
  EXPECT_EQ(pool.NumUsedBlocks(), 3);
  pool.CheckInvariants();
}

TEST(BlockPoolTest, TouchAndReleaseCountReferences) {
  BlockPool pool(4, true);
  const std::vector<BlockId> ids = Take(pool, 1);
  pool.Touch(ids[0]);
  EXPECT_EQ(pool.ref_cnt(ids[0]), 2);
  pool.Release(ids[0]);
  EXPECT_EQ(pool.ref_cnt(ids[0]), 1);
  EXPECT_EQ(pool.NumFreeBlocks(), 2);
  pool.Release(ids[0]);
  EXPECT_EQ(pool.ref_cnt(ids[0]), 0);
  EXPECT_EQ(pool.NumFreeBlocks(), 3);
  pool.CheckInvariants();
}

TEST(BlockPoolTest, FreedCachedBlocksGoBackUncachedGoFront) {
  BlockPool pool(6, true);
  const std::vector<BlockId> ids = Take(pool, 4);  // 1 2 3 4; 5 stays free
  pool.CacheFullBlock(1, Hash(1));
  pool.CacheFullBlock(2, Hash(2));
  pool.Release(1);
  pool.Release(3);
  pool.Release(2);
  pool.Release(4);
  EXPECT_THAT(pool.FreeBlocksInEvictionOrder(), ElementsAre(4, 3, 5, 1, 2));
  EXPECT_EQ(pool.NumCachedFreeBlocks(), 2);
  pool.CheckInvariants();
}

TEST(BlockPoolTest, LookupFindsHeldAndFreeCachedBlocks) {
  BlockPool pool(4, true);
  Take(pool, 2);
  pool.CacheFullBlock(2, Hash(7));
  EXPECT_THAT(pool.Lookup(Hash(7)), Optional(2));
  EXPECT_EQ(pool.Lookup(Hash(8)), std::nullopt);
  EXPECT_THAT(pool.cached_hash(2), Optional(Hash(7)));
  EXPECT_EQ(pool.cached_hash(1), std::nullopt);
  pool.Release(2);
  EXPECT_THAT(pool.Lookup(Hash(7)), Optional(2));
  pool.CheckInvariants();
}

TEST(BlockPoolTest, TouchRevivesAFreeCachedBlock) {
  BlockPool pool(4, true);
  Take(pool, 1);
  pool.CacheFullBlock(1, Hash(1));
  pool.Release(1);
  ASSERT_EQ(pool.NumCachedFreeBlocks(), 1);
  pool.Touch(1);
  EXPECT_EQ(pool.ref_cnt(1), 1);
  EXPECT_EQ(pool.NumCachedFreeBlocks(), 0);
  EXPECT_EQ(pool.NumFreeBlocks(), 2);
  EXPECT_THAT(pool.Lookup(Hash(1)), Optional(1));
  EXPECT_THAT(pool.FreeBlocksInEvictionOrder(), ElementsAre(2, 3));
  pool.CheckInvariants();
}

TEST(BlockPoolTest, AllocationEvictsLeastRecentlyFreedPrefixFirst) {
  BlockPool pool(4, true);
  Take(pool, 3);
  for (BlockId id : {1, 2, 3}) {
    pool.CacheFullBlock(id, Hash(id));
  }
  for (BlockId id : {2, 3, 1}) {
    pool.Release(id);
  }
  EXPECT_THAT(Take(pool, 1), ElementsAre(2));
  EXPECT_EQ(pool.Lookup(Hash(2)), std::nullopt);
  EXPECT_EQ(pool.cached_hash(2), std::nullopt);
  EXPECT_THAT(pool.Lookup(Hash(3)), Optional(3));
  EXPECT_THAT(Take(pool, 1), ElementsAre(3));
  EXPECT_THAT(pool.Lookup(Hash(1)), Optional(1));
  EXPECT_EQ(pool.NumCachedFreeBlocks(), 1);
  pool.CheckInvariants();
}

// Enough blocks that Allocate looks ahead past the ones it takes, with
// revived blocks (removed from the queue, still in its ring) among them.
TEST(BlockPoolTest, LargeAllocationEvictsInQueueOrderSkippingRevivedBlocks) {
  constexpr int32_t kNumBlocks = 65;
  BlockPool pool(kNumBlocks, true);
  std::vector<BlockId> ids = Take(pool, kNumBlocks - 1);
  for (BlockId id : ids) {
    pool.CacheFullBlock(id, Hash(static_cast<uint64_t>(id)));
  }
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  for (BlockId id : ids) {
    pool.Release(id);
  }
  std::vector<BlockId> revived;
  for (size_t i = 3; i < ids.size(); i += 5) {
    pool.Touch(ids[i]);
    revived.push_back(ids[i]);
  }
  std::vector<BlockId> order = pool.FreeBlocksInEvictionOrder();
  ASSERT_EQ(order.size(), ids.size() - revived.size());
  pool.CheckInvariants();

  const std::vector<BlockId> taken = Take(pool, 40);
  EXPECT_EQ(taken, std::vector<BlockId>(order.begin(), order.begin() + 40));
  for (BlockId id : taken) {
    EXPECT_EQ(pool.Lookup(Hash(static_cast<uint64_t>(id))), std::nullopt);
    EXPECT_EQ(pool.ref_cnt(id), 1);
  }
  for (BlockId id : revived) {
    EXPECT_THAT(pool.Lookup(Hash(static_cast<uint64_t>(id))), Optional(id));
  }
  for (auto it = order.begin() + 40; it != order.end(); ++it) {
    EXPECT_THAT(pool.Lookup(Hash(static_cast<uint64_t>(*it))), Optional(*it));
  }
  EXPECT_EQ(pool.NumCachedFreeBlocks(), static_cast<int32_t>(order.size()) - 40);
  pool.CheckInvariants();
}

TEST(BlockPoolTest, SecondBlockWithTheSamePrefixStaysOutOfTheIndex) {
  BlockPool pool(4, true);
  Take(pool, 2);
  pool.CacheFullBlock(1, Hash(5));
  pool.CacheFullBlock(2, Hash(5));
  EXPECT_THAT(pool.Lookup(Hash(5)), Optional(1));
  EXPECT_EQ(pool.cached_hash(2), std::nullopt);
  pool.CheckInvariants();
}

TEST(BlockPoolTest, CachingDisabledIndexesNothing) {
  BlockPool pool(4, /*enable_caching=*/false);
  Take(pool, 1);
  pool.CacheFullBlock(1, Hash(1));
  EXPECT_EQ(pool.Lookup(Hash(1)), std::nullopt);
  pool.Release(1);
  EXPECT_EQ(pool.NumCachedFreeBlocks(), 0);
  pool.CheckInvariants();
}

TEST(BlockPoolDeathTest, RejectsMisuse) {
  BlockPool pool(3, true);
  std::vector<BlockId> ids;
  EXPECT_DEATH(pool.Allocate(3, &ids), "NumFreeBlocks");
  EXPECT_DEATH(pool.Release(1), "ref_cnt > 0");
  EXPECT_DEATH(pool.Touch(kNullBlockId), "kNullBlockId");
}

}  // namespace
}  // namespace loom
