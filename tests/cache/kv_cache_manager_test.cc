#include "cache/kv_cache_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "tests/cache/token_ids.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr int32_t kBlockSize = 4;

CacheRequest Req(int64_t seq_id, const std::vector<int32_t>& tokens, std::string_view salt = "") {
  return CacheRequest{.seq_id = seq_id, .token_ids = tokens, .cache_salt = salt};
}

// An AllocateSlots result that had room and appended blocks matching m.
MATCHER_P(Appended, m, "") {
  return arg.has_value() && ::testing::ExplainMatchResult(m, arg->new_blocks(), result_listener);
}

KvCacheManager Manager(int32_t num_blocks, bool caching = true) {
  return KvCacheManager(KvCacheConfig{
      .num_blocks = num_blocks, .block_size = kBlockSize, .enable_prefix_caching = caching});
}

// Looks up the prefix and allocates slots for all the remaining tokens, as a
// scheduler admitting a whole prompt does. Returns the number of hit tokens.
int32_t Admit(KvCacheManager& cache, const CacheRequest& req) {
  const ComputedBlocks hits = cache.GetComputedBlocks(req);
  const int32_t num_new = static_cast<int32_t>(req.token_ids.size()) - hits.num_computed_tokens;
  EXPECT_TRUE(cache.AllocateSlots(req, 0, num_new, &hits).has_value());
  cache.CheckInvariants();
  return hits.num_computed_tokens;
}

TEST(KvCacheManagerTest, AllocatesWholeBlocksForAPrompt) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(10);
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(1, tokens));
  EXPECT_THAT(hits.blocks, IsEmpty());
  const std::optional<SlotAllocation> allocation =
      cache.AllocateSlots(Req(1, tokens), 0, 10, &hits);
  EXPECT_THAT(allocation, Appended(ElementsAre(1, 2, 3)));
  ASSERT_TRUE(allocation.has_value());
  EXPECT_THAT(allocation->block_table, ElementsAre(1, 2, 3));
  EXPECT_EQ(allocation->block_table.data(), cache.BlockTable(1).data()) << "a view of the table";
  EXPECT_EQ(cache.Stats().num_used, 3);
  EXPECT_EQ(cache.NumFreeBlocks(), 4);
  cache.CheckInvariants();
}

// Two caches driven alike, one step made by one batch in the first and by
// AllocateSlots calls in the second, end up identical: tables, free-queue
// order, cached hashes and counters. The step mixes decodes that stay in
// their last block, fill it or need a new one, prefill chunks and forked
// children that hold no block yet; 24 sequences cover the batch's pipeline.
TEST(KvCacheManagerTest, BatchDoesWhatTheCallsInOrderDo) {
  for (const bool caching : {true, false}) {
    KvCacheManager batched = Manager(160, caching);
    KvCacheManager sequential = Manager(160, caching);
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int32_t> computed;
    for (int32_t s = 0; s < 24; ++s) {
      // Shared stems, so that some prompts hit blocks cached by earlier ones.
      tokens.push_back(Tokens(5 + (s * 7) % 19, 100 * (s % 3)));
      computed.push_back(0);
      for (KvCacheManager* cache : {&batched, &sequential}) {
        if (s % 6 == 5) {
          cache->Fork(s - 1, s, 3);  // a child with no full block to share
          continue;
        }
        const ComputedBlocks hits = cache->GetComputedBlocks(Req(s, tokens[s]));
        const auto num_tokens = static_cast<int32_t>(tokens[s].size());
        computed[s] = std::max(std::min(1 + s % 11, num_tokens), hits.num_computed_tokens + 1);
        ASSERT_TRUE(
            cache
                ->AllocateSlots(Req(s, tokens[s]), 0, computed[s] - hits.num_computed_tokens, &hits)
                .has_value());
      }
    }
    batched.Free(7);  // a freed table, so that the step evicts and reuses blocks
    sequential.Free(7);
    std::vector<SlotRequest> batch;
    for (int32_t s = 0; s < 24; ++s) {
      if (s == 7) {
        continue;
      }
      if (computed[s] == static_cast<int32_t>(tokens[s].size())) {
        tokens[s].push_back(s);  // a decode
      }
      const int32_t num_new = static_cast<int32_t>(tokens[s].size()) - computed[s];
      batch.push_back(SlotRequest{
          .req = Req(s, tokens[s]), .num_computed_tokens = computed[s], .num_new_tokens = num_new});
    }
    std::vector<std::span<const BlockId>> tables(batch.size());
    batched.AllocateSlotsBatch(batch, tables);
    for (const SlotRequest& call : batch) {
      ASSERT_TRUE(sequential.AllocateSlots(call.req, call.num_computed_tokens, call.num_new_tokens)
                      .has_value());
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t id = batch[i].req.seq_id;
      EXPECT_THAT(tables[i], ElementsAreArray(sequential.BlockTable(id))) << "seq " << id;
      EXPECT_THAT(batched.BlockTable(id), ElementsAreArray(sequential.BlockTable(id)));
    }
    EXPECT_EQ(batched.pool().FreeBlocksInEvictionOrder(),
              sequential.pool().FreeBlocksInEvictionOrder());
    for (BlockId id = 1; id < 160; ++id) {
      EXPECT_EQ(batched.pool().cached_hash(id), sequential.pool().cached_hash(id)) << id;
    }
    EXPECT_EQ(batched.Stats().num_cached_free, sequential.Stats().num_cached_free);
    EXPECT_EQ(batched.NumFreeBlocks(), sequential.NumFreeBlocks());
    batched.CheckInvariants();
  }
}

TEST(KvCacheManagerTest, DecodeTakesANewBlockOnlyAtABoundary) {
  KvCacheManager cache = Manager(8);
  std::vector<int32_t> tokens = Tokens(10);
  Admit(cache, Req(1, tokens));
  for (int32_t computed = 10; computed < 12; ++computed) {
    tokens.push_back(computed);
    EXPECT_THAT(cache.AllocateSlots(Req(1, tokens), computed, 1), Appended(IsEmpty()));
  }
  tokens.push_back(12);
  EXPECT_THAT(cache.AllocateSlots(Req(1, tokens), 12, 1), Appended(ElementsAre(4)));
  EXPECT_EQ(cache.BlockTable(1).size(), 4U);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, ChunkedPrefillExtendsTheTable) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(10);
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(1, tokens));
  EXPECT_THAT(cache.AllocateSlots(Req(1, tokens), 0, 3, &hits), Appended(ElementsAre(1)));
  EXPECT_THAT(cache.AllocateSlots(Req(1, tokens), 3, 3), Appended(ElementsAre(2)));
  EXPECT_THAT(cache.AllocateSlots(Req(1, tokens), 6, 4), Appended(ElementsAre(3)));
  EXPECT_THAT(cache.BlockTable(1), ElementsAre(1, 2, 3));
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, IdenticalPromptHitsItsFullBlocks) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(10);
  Admit(cache, Req(1, tokens));
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(2, tokens));
  EXPECT_THAT(hits.blocks, ElementsAre(1, 2));
  EXPECT_EQ(hits.num_computed_tokens, 8);
  EXPECT_EQ(cache.Stats().prefix_query_tokens, 20);
  EXPECT_EQ(cache.Stats().prefix_hit_tokens, 8);
  const std::optional<SlotAllocation> allocation = cache.AllocateSlots(Req(2, tokens), 0, 2, &hits);
  EXPECT_THAT(allocation, Appended(ElementsAre(4))) << "hit blocks are not new";
  ASSERT_TRUE(allocation.has_value());
  EXPECT_THAT(allocation->block_table, ElementsAre(1, 2, 4));
  EXPECT_THAT(cache.BlockTable(2), ElementsAre(1, 2, 4));
  EXPECT_EQ(cache.pool().ref_cnt(1), 2);
  EXPECT_EQ(cache.pool().ref_cnt(3), 1);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, HitLeavesTheLastTokenToCompute) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(8);
  Admit(cache, Req(1, tokens));
  EXPECT_EQ(cache.GetComputedBlocks(Req(2, tokens)).num_computed_tokens, 4);
  const std::vector<int32_t> one = Tokens(1);
  EXPECT_THAT(cache.GetComputedBlocks(Req(3, one)).blocks, IsEmpty());
}

TEST(KvCacheManagerTest, DecodedTokensBecomeCachedPrefixes) {
  KvCacheManager cache = Manager(8);
  std::vector<int32_t> tokens = Tokens(3);
  Admit(cache, Req(1, tokens));
  for (int32_t computed = 3; computed < 9; ++computed) {
    tokens.push_back(computed);
    ASSERT_TRUE(cache.AllocateSlots(Req(1, tokens), computed, 1).has_value());
  }
  EXPECT_EQ(cache.GetComputedBlocks(Req(2, tokens)).num_computed_tokens, 8);
}

TEST(KvCacheManagerTest, CacheSaltIsolatesRequests) {
  KvCacheManager cache = Manager(16);
  const std::vector<int32_t> tokens = Tokens(12);
  Admit(cache, Req(1, tokens, "tenant-a"));
  EXPECT_EQ(Admit(cache, Req(2, tokens, "tenant-b")), 0);
  EXPECT_EQ(Admit(cache, Req(3, tokens, "")), 0);
  EXPECT_EQ(Admit(cache, Req(4, tokens, "tenant-a")), 8);
  EXPECT_EQ(Admit(cache, Req(5, tokens, "tenant-b")), 8);
}

TEST(KvCacheManagerTest, DivergingPromptsShareOnlyTheCommonBlocks) {
  KvCacheManager cache = Manager(16);
  const std::vector<int32_t> a = Tokens(12);
  std::vector<int32_t> b = a;
  b[5] = -1;
  Admit(cache, Req(1, a));
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(2, b));
  EXPECT_THAT(hits.blocks, ElementsAre(cache.BlockTable(1)[0]));
  // A later equal block behind a different prefix is not a hit.
  std::vector<int32_t> c = a;
  c[0] = -1;
  EXPECT_THAT(cache.GetComputedBlocks(Req(3, c)).blocks, IsEmpty());
}

TEST(KvCacheManagerTest, HitRevivesFreeCachedBlocks) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(9);
  Admit(cache, Req(1, tokens));
  const std::vector<BlockId> first(cache.BlockTable(1).begin(), cache.BlockTable(1).end());
  cache.Free(1);
  EXPECT_EQ(cache.NumFreeBlocks(), 7);
  EXPECT_EQ(cache.Stats().num_cached_free, 2);
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(2, tokens));
  EXPECT_THAT(hits.blocks, ElementsAre(first[0], first[1]));
  ASSERT_TRUE(cache.AllocateSlots(Req(2, tokens), 0, 1, &hits).has_value());
  EXPECT_EQ(cache.NumFreeBlocks(), 4);
  EXPECT_EQ(cache.Stats().num_cached_free, 0);
  EXPECT_EQ(cache.pool().ref_cnt(first[0]), 1);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, EvictsLeastRecentlyFreedPrefixesTailFirst) {
  KvCacheManager cache = Manager(7);  // 6 usable blocks
  const std::vector<int32_t> a = Tokens(9, 100);
  const std::vector<int32_t> b = Tokens(9, 200);
  Admit(cache, Req(1, a));
  Admit(cache, Req(2, b));
  cache.Free(1);
  cache.Free(2);
  // Uncached tails first, then a's blocks tail first, then b's.
  const std::vector<int32_t> c = Tokens(12, 300);
  EXPECT_EQ(Admit(cache, Req(3, c)), 0);
  EXPECT_EQ(cache.GetComputedBlocks(Req(4, a)).num_computed_tokens, 4);
  EXPECT_EQ(cache.GetComputedBlocks(Req(4, b)).num_computed_tokens, 8);
  std::vector<int32_t> longer_c = c;
  longer_c.push_back(0);
  ASSERT_TRUE(cache.AllocateSlots(Req(3, longer_c), 12, 1).has_value());
  EXPECT_EQ(cache.GetComputedBlocks(Req(4, a)).num_computed_tokens, 0);
  EXPECT_EQ(cache.GetComputedBlocks(Req(4, b)).num_computed_tokens, 8);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, NoRoomLeavesStateUnchanged) {
  KvCacheManager cache = Manager(4);  // 3 usable blocks
  const std::vector<int32_t> a = Tokens(9);
  Admit(cache, Req(1, a));
  const KvCacheStats before = cache.Stats();
  const std::vector<int32_t> b = Tokens(2, 500);
  EXPECT_EQ(cache.AllocateSlots(Req(2, b), 0, 2), std::nullopt);
  std::vector<int32_t> longer_a = a;
  longer_a.insert(longer_a.end(), {1, 2, 3, 4});
  EXPECT_EQ(cache.AllocateSlots(Req(1, longer_a), 9, 4), std::nullopt);
  const KvCacheStats after = cache.Stats();
  EXPECT_EQ(after.num_free, before.num_free);
  EXPECT_EQ(after.num_used, before.num_used);
  EXPECT_THAT(cache.BlockTable(1), ElementsAre(1, 2, 3));
  EXPECT_THAT(cache.BlockTable(2), IsEmpty());
  cache.CheckInvariants();
  cache.Free(1);
  EXPECT_TRUE(cache.AllocateSlots(Req(2, b), 0, 2).has_value());
}

TEST(KvCacheManagerTest, RevivedHitBlocksCountAgainstFreeBlocks) {
  KvCacheManager cache = Manager(5);  // 4 usable blocks
  const std::vector<int32_t> a = Tokens(9);
  Admit(cache, Req(1, a));
  cache.Free(1);
  const std::vector<int32_t> d = Tokens(5, 900);
  Admit(cache, Req(2, d));  // takes the free uncached blocks; a's two cached ones stay
  ASSERT_EQ(cache.Stats().num_cached_free, 2);
  ASSERT_EQ(cache.NumFreeBlocks(), 2);
  // Two revived hits plus one new block need three free blocks.
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(3, a));
  ASSERT_EQ(hits.blocks.size(), 2U);
  EXPECT_EQ(cache.AllocateSlots(Req(3, a), 0, 1, &hits), std::nullopt);
  EXPECT_EQ(cache.NumFreeBlocks(), 2);
  EXPECT_EQ(cache.Stats().num_cached_free, 2);
  EXPECT_THAT(cache.BlockTable(3), IsEmpty());
  cache.CheckInvariants();
  cache.Free(2);
  const ComputedBlocks again = cache.GetComputedBlocks(Req(3, a));
  EXPECT_EQ(again.blocks.size(), 2U);
  EXPECT_TRUE(cache.AllocateSlots(Req(3, a), 0, 1, &again).has_value());
  cache.CheckInvariants();
}

void ExpectForkSharesFullBlocks(bool caching) {
  KvCacheManager cache = Manager(10, caching);
  const std::vector<int32_t> prompt = Tokens(10);
  Admit(cache, Req(1, prompt));
  const std::span<const BlockId> child = cache.Fork(1, 2, 10).block_table;
  const std::span<const BlockId> parent = cache.BlockTable(1);
  EXPECT_THAT(child, ElementsAre(parent[0], parent[1]));
  EXPECT_THAT(cache.BlockTable(2), ElementsAre(parent[0], parent[1]));
  EXPECT_EQ(cache.pool().ref_cnt(parent[0]), 2);
  EXPECT_EQ(cache.pool().ref_cnt(parent[2]), 1);
  cache.CheckInvariants();
  // The child recomputes the partial block itself.
  const std::optional<SlotAllocation> added = cache.AllocateSlots(Req(2, prompt), 8, 2);
  ASSERT_TRUE(added.has_value());
  ASSERT_EQ(added->num_new_blocks, 1);
  EXPECT_EQ(added->block_table.size(), 3U);
  EXPECT_NE(added->new_blocks()[0], cache.BlockTable(1)[2]);
  EXPECT_EQ(cache.Stats().num_used, 4);
  cache.Free(1);
  EXPECT_EQ(cache.Stats().num_used, 3);
  cache.CheckInvariants();
  cache.Free(2);
  EXPECT_EQ(cache.Stats().num_used, 0);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, ForkSharesFullBlocksWithPrefixCaching) {
  ExpectForkSharesFullBlocks(true);
}

TEST(KvCacheManagerTest, ForkSharesFullBlocksWithoutPrefixCaching) {
  ExpectForkSharesFullBlocks(false);
}

TEST(KvCacheManagerTest, PrefixCachingOffSharesNothing) {
  KvCacheManager cache = Manager(16, /*caching=*/false);
  const std::vector<int32_t> tokens = Tokens(12);
  EXPECT_EQ(Admit(cache, Req(1, tokens)), 0);
  EXPECT_EQ(Admit(cache, Req(2, tokens)), 0);
  const std::span<const BlockId> a = cache.BlockTable(1);
  for (BlockId id : cache.BlockTable(2)) {
    EXPECT_THAT(a, ::testing::Not(::testing::Contains(id)));
  }
  cache.Free(1);
  EXPECT_EQ(cache.Stats().num_cached_free, 0);
  EXPECT_EQ(cache.Stats().prefix_query_tokens, 0);
  EXPECT_EQ(cache.Stats().prefix_hit_tokens, 0);
}

TEST(KvCacheManagerTest, FreeReturnsEveryBlockAndIgnoresUnknownIds) {
  KvCacheManager cache = Manager(8);
  const std::vector<int32_t> tokens = Tokens(10);
  Admit(cache, Req(1, tokens));
  cache.Free(42);
  EXPECT_THAT(cache.BlockTable(42), IsEmpty());
  cache.Free(1);
  cache.Free(1);
  EXPECT_THAT(cache.BlockTable(1), IsEmpty());
  EXPECT_EQ(cache.Stats().num_used, 0);
  EXPECT_EQ(cache.NumFreeBlocks(), 7);
  cache.CheckInvariants();
}

TEST(KvCacheManagerTest, UsageAndStatsCountHeldBlocksOnce) {
  KvCacheManager cache = Manager(9);  // 8 usable blocks
  const std::vector<int32_t> tokens = Tokens(9);
  Admit(cache, Req(1, tokens));
  Admit(cache, Req(2, tokens));  // shares two blocks, adds one
  EXPECT_DOUBLE_EQ(cache.Usage(), 4.0 / 8.0);
  const KvCacheStats stats = cache.Stats();
  EXPECT_EQ(stats.num_blocks, 8);
  EXPECT_EQ(stats.num_used, 4);
  EXPECT_EQ(stats.num_free, 4);
  EXPECT_EQ(cache.block_size(), kBlockSize);
}

TEST(KvCacheManagerDeathTest, RejectsStaleHitsAndImpossibleRanges) {
  KvCacheManager cache = Manager(4);  // 3 usable blocks
  const std::vector<int32_t> a = Tokens(9);
  Admit(cache, Req(1, a));
  cache.Free(1);
  const ComputedBlocks hits = cache.GetComputedBlocks(Req(2, a));
  ASSERT_EQ(hits.blocks.size(), 2U);
  const std::vector<int32_t> other = Tokens(12, 700);
  ASSERT_TRUE(cache.AllocateSlots(Req(3, other), 0, 12).has_value());  // evicts a's prefix
  cache.Free(3);
  EXPECT_DEATH((void)cache.AllocateSlots(Req(2, a), 0, 1, &hits), "cached_hash");
  EXPECT_DEATH((void)cache.AllocateSlots(Req(4, a), 4, 1), "num_computed_tokens");
  ASSERT_TRUE(cache.AllocateSlots(Req(5, a), 0, 1).has_value());
  EXPECT_DEATH((void)cache.GetComputedBlocks(Req(5, a)), "block_table.empty");
  // A batch whose blocks do not fit, or that names an unknown sequence.
  std::vector<std::span<const BlockId>> tables(1);
  const std::vector<int32_t> long_prompt = Tokens(64);
  const SlotRequest too_big{
      .req = Req(5, long_prompt), .num_computed_tokens = 1, .num_new_tokens = 60};
  EXPECT_DEATH(cache.AllocateSlotsBatch(std::span(&too_big, 1), tables), "must fit");
  const SlotRequest unknown{.req = Req(42, a), .num_computed_tokens = 0, .num_new_tokens = 1};
  EXPECT_DEATH(cache.AllocateSlotsBatch(std::span(&unknown, 1), tables), "hold blocks");
}

}  // namespace
}  // namespace loom
