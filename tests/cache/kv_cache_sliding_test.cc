// KvCacheManager with a hybrid layout (types/kv_cache_layout.h): a
// full-attention group of one page and a sliding-window group of two pages per
// logical block, as a Gemma-like model with three layers per page has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "tests/cache/token_ids.h"

namespace loom {
namespace {

using ::testing::Each;
using ::testing::Eq;
using ::testing::Not;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kWindow = 8;
constexpr int32_t kStride = 3;  // entry 0: full attention; 1, 2: sliding

CacheRequest Req(int64_t seq_id, const std::vector<int32_t>& tokens) {
  return CacheRequest{.seq_id = seq_id, .token_ids = tokens, .cache_salt = ""};
}

KvCacheManager Hybrid(int32_t num_blocks, bool caching = true) {
  return KvCacheManager(KvCacheConfig{
      .num_blocks = num_blocks,
      .block_size = kBlockSize,
      .enable_prefix_caching = caching,
      .layout = {.groups = {{.num_pages = 1}, {.num_pages = 2, .sliding_window = kWindow}}}});
}

// The entries of one group (0: full, 1: sliding) of a table, logical block
// after logical block.
std::vector<BlockId> Entries(std::span<const BlockId> table, int32_t group) {
  std::vector<BlockId> out;
  for (size_t i = 0; i < table.size(); ++i) {
    if ((i % kStride == 0) == (group == 0)) out.push_back(table[i]);
  }
  return out;
}

// Decoding a long sequence: its full-attention pages stay, its sliding pages
// leave as the window passes them, and the per-group counts follow.
TEST(KvCacheSlidingTest, SlidingPagesLeaveWithTheWindowFullPagesStay) {
  KvCacheManager cache = Hybrid(64);
  const std::vector<int32_t> tokens = Tokens(60);
  ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), 0, 5).has_value());
  for (int32_t computed = 5; computed < 60; ++computed) {
    ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), computed, 1).has_value());
    cache.CheckInvariants();
    const std::span<const BlockId> table = cache.BlockTable(1);
    const int32_t logical = static_cast<int32_t>(table.size()) / kStride;
    EXPECT_EQ(logical, computed / kBlockSize + 1);
    EXPECT_THAT(Entries(table, 0), Each(Not(Eq(kNullBlockId))));
    // The next query, at `computed`, reads from computed - 7 on.
    const int32_t first = computed >= kWindow ? (computed - kWindow + 1) / kBlockSize : 0;
    const std::vector<BlockId> sliding = Entries(table, 1);
    for (int32_t b = 0; b < logical; ++b) {
      EXPECT_EQ(sliding[2 * b] == kNullBlockId, b < first) << "block " << b << " at " << computed;
      EXPECT_EQ(sliding[2 * b + 1] == kNullBlockId, b < first);
    }
    const KvCacheStats stats = cache.Stats();
    EXPECT_EQ(stats.num_used_full, logical);
    EXPECT_EQ(stats.num_used_sliding, 2 * (logical - first));
    EXPECT_EQ(stats.num_used, stats.num_used_full + stats.num_used_sliding);
    EXPECT_EQ(cache.NumBlocksHeld(1), stats.num_used);
  }
  cache.Free(1);
  cache.CheckInvariants();
  EXPECT_EQ(cache.Stats().num_used, 0);
  EXPECT_EQ(cache.Stats().num_used_sliding, 0);
}

// A prefix hit brings the full pages of every block and the sliding pages of
// the window only; the next query finds all it reads.
TEST(KvCacheSlidingTest, HitsCoverWhatEachGroupStillReads) {
  KvCacheManager cache = Hybrid(64);
  const std::vector<int32_t> tokens = Tokens(30);
  ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), 0, 30).has_value());
  cache.Free(1);
  // 7 blocks are full and cached; the hit leaves the last token to compute.
  const ComputedBlocks hit = cache.GetComputedBlocks(Req(2, tokens));
  ASSERT_EQ(hit.num_computed_tokens, 28);
  ASSERT_EQ(hit.blocks.size(), 7u * kStride);
  EXPECT_THAT(Entries(hit.blocks, 0), Each(Not(Eq(kNullBlockId))));
  // Position 28 reads 21..28: blocks 5 and 6 (and 7, being computed).
  const std::vector<BlockId> sliding = Entries(hit.blocks, 1);
  for (int32_t b = 0; b < 7; ++b) {
    EXPECT_EQ(sliding[2 * b] == kNullBlockId, b < 5) << b;
    EXPECT_EQ(sliding[2 * b + 1] == kNullBlockId, b < 5) << b;
  }
  ASSERT_TRUE(cache.AllocateSlots(Req(2, tokens), 0, 2, &hit).has_value());
  cache.CheckInvariants();
  EXPECT_EQ(cache.NumBlocksHeld(2), 8 + 2 * 3);
  cache.Free(2);
}

// Sliding pages the window has left are freed (cached) first, so they are the
// first cached blocks evicted; a hit does not need them. Once the window's own
// pages go, no hit is left: every shorter one needs pages evicted before.
int32_t HitAfterPressure(int32_t pressure_blocks) {
  KvCacheManager cache = Hybrid(64);  // 63 usable
  const std::vector<int32_t> tokens = Tokens(30);
  EXPECT_TRUE(cache.AllocateSlots(Req(1, tokens), 0, 5).has_value());
  for (int32_t computed = 5; computed < 30; ++computed) {
    EXPECT_TRUE(cache.AllocateSlots(Req(1, tokens), computed, 1).has_value());
  }
  // The last call (at 29) released the sliding pages of blocks 0-4.
  EXPECT_EQ(cache.NumBlocksHeld(1), 8 * kStride - 5 * 2);
  cache.Free(1);
  // The free queue now hands out block 7's three pages (not full, so not
  // cached), the 39 blocks never used, the 10 pages released early, then the
  // rest tail first: block 6's sliding pages, its full page, block 5's...
  const std::vector<int32_t> other = Tokens(4 * 21, 5000);
  EXPECT_TRUE(
      cache.AllocateSlots(Req(3, other), 0, pressure_blocks / kStride * kBlockSize).has_value());
  cache.CheckInvariants();
  return cache.GetComputedBlocks(Req(2, tokens)).num_computed_tokens;
}

TEST(KvCacheSlidingTest, HitsSurviveEvictionOfPagesOutsideTheWindow) {
  EXPECT_EQ(HitAfterPressure(51), 28);  // 9 of the 10 early pages evicted
  EXPECT_EQ(HitAfterPressure(54), 0);   // all 10, and block 6's two sliding pages
}

// A child shares the parent's blocks only if the parent still holds the
// sliding pages the child's first query reads.
TEST(KvCacheSlidingTest, ForkSharesOnlyWhatTheChildCanRead) {
  KvCacheManager cache = Hybrid(64, /*caching=*/false);
  const std::vector<int32_t> tokens = Tokens(30);
  ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), 0, 20).has_value());
  ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), 20, 10).has_value());  // releases blocks 0-2
  const ForkedBlocks late = cache.Fork(1, 2, 29);  // the child reads 21.. from block 5
  EXPECT_EQ(late.num_computed_tokens, 28);
  EXPECT_EQ(late.block_table.size(), 7u * kStride);
  const ForkedBlocks early = cache.Fork(1, 3, 9);  // would read 2.. from block 0: released
  EXPECT_EQ(early.num_computed_tokens, 0);
  EXPECT_TRUE(early.block_table.empty());
  cache.CheckInvariants();
  for (int64_t id : {1, 2, 3}) cache.Free(id);
  EXPECT_EQ(cache.Stats().num_used, 0);
}

// KV-cache events speak of logical blocks by their full-attention page.
TEST(KvCacheSlidingTest, EventsReportFirstPagesOnly) {
  KvCacheManager cache = Hybrid(64);
  cache.EnableEvents();
  const std::vector<int32_t> tokens = Tokens(13);
  ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), 0, 13).has_value());
  const std::vector<KvEvent> events = cache.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kBlockStored);
  EXPECT_EQ(events[0].block_hashes.size(), 3u);
  EXPECT_EQ(cache.CachedBlockHashes().size(), 3u);
  for (const BlockHash& hash : events[0].block_hashes) {
    EXPECT_TRUE(cache.pool().Lookup(hash).has_value());
  }
}

}  // namespace
}  // namespace loom
