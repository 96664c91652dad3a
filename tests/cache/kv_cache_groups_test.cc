#include "cache/kv_cache_groups.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom {
namespace {

// Gemma 3's shape: one full-attention page and five sliding pages per
// logical block, a window of 512 positions, blocks of 16.
KvCacheGroups Gemma() {
  return KvCacheGroups(
      KvCacheLayout{.groups = {{.num_pages = 1}, {.num_pages = 5, .sliding_window = 512}}}, 16);
}

TEST(KvCacheGroupsTest, EntriesAndWindow) {
  const KvCacheGroups g = Gemma();
  EXPECT_EQ(g.stride(), 6);
  EXPECT_EQ(g.sliding_window(), 512);
  EXPECT_EQ(g.sliding_pages(), 5);
  EXPECT_FALSE(g.is_sliding(0));
  for (int32_t k = 1; k < 6; ++k) EXPECT_TRUE(g.is_sliding(k)) << k;
  EXPECT_EQ(g.group_of(0), 0);
  EXPECT_EQ(g.group_of(5), 1);
}

// A query at p reads (p - 512, p]: blocks wholly below p - 511 are done.
TEST(KvCacheGroupsTest, FirstNeededBlockFollowsTheWindow) {
  const KvCacheGroups g = Gemma();
  EXPECT_EQ(g.FirstNeededBlock(0), 0);
  EXPECT_EQ(g.FirstNeededBlock(511), 0);
  EXPECT_EQ(g.FirstNeededBlock(512), 0);  // reads positions 1..512: block 0 still
  EXPECT_EQ(g.FirstNeededBlock(527), 1);  // reads 16..527
  EXPECT_EQ(g.FirstNeededBlock(16000), (16000 - 511) / 16);
  const KvCacheGroups plain(KvCacheLayout{}, 16);
  EXPECT_EQ(plain.FirstNeededBlock(16000), 0);
}

// Entry 0 keeps the chained hash (a one-page layout keys blocks as before);
// the other entries get keys of their own, different from each other.
TEST(KvCacheGroupsTest, PageHashes) {
  const KvCacheGroups g = Gemma();
  const BlockHash chain{0x1234, 0x5678};
  EXPECT_EQ(g.PageHash(chain, 0), chain);
  for (int32_t a = 1; a < 6; ++a) {
    EXPECT_NE(g.PageHash(chain, a), chain);
    for (int32_t b = a + 1; b < 6; ++b) EXPECT_NE(g.PageHash(chain, a), g.PageHash(chain, b));
  }
}

// The full group needs every block of the hit; the sliding group only those
// the next query reads.
TEST(KvCacheGroupsTest, LongestHitNeedsEachGroupsBlocks) {
  const KvCacheGroups g(
      KvCacheLayout{.groups = {{.num_pages = 1}, {.num_pages = 1, .sliding_window = 8}}}, 4);
  // Sliding pages of blocks 0-1 evicted: a hit of 5 blocks (position 20 reads
  // 13..19, blocks 3-4) still works.
  std::vector<std::vector<bool>> cached = {{true, true, true, true, true},
                                           {false, false, true, true, true}};
  EXPECT_EQ(g.LongestHit(cached), 5);
  // A hole in the window: block 4 missing cuts the hit to where the window
  // before it is whole; 4 blocks need blocks 2-3 (position 16 reads 9..15).
  cached[1] = {false, false, true, true, false};
  EXPECT_EQ(g.LongestHit(cached), 4);
  // Full-attention pages are needed from the start: a miss in block 1 leaves
  // a hit of one block at most, and that block's sliding page is gone too.
  cached[0] = {true, false, true, true, true};
  EXPECT_EQ(g.LongestHit(cached), 0);
  cached = {{true, true}, {true, false}};
  EXPECT_EQ(g.LongestHit(cached), 1);
}

TEST(KvCacheGroupsTest, MaxBlocksHeld) {
  const KvCacheGroups g = Gemma();
  // 16k tokens decoded one at a time: the full page of every block, the
  // sliding pages of the window's 33 blocks and one more for the next token.
  const int64_t blocks = 16384 / 16;
  EXPECT_EQ(g.MaxBlocksHeld(16384, 1), blocks + 5 * (32 + 1 + 2));
  // Below the window's size every block is needed.
  EXPECT_EQ(g.MaxBlocksHeld(100, 512), 6 * 7);
  const KvCacheGroups plain(KvCacheLayout{}, 16);
  EXPECT_EQ(plain.MaxBlocksHeld(16384, 512), blocks);
}

}  // namespace
}  // namespace loom
