// The cache's KV-cache events: what each call records, and, over a randomized
// workload, that replaying the events rebuilds exactly the prefix index.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "cache/block_hash.h"
#include "cache/kv_cache_manager.h"
#include "tests/cache/token_ids.h"
#include "types/kv_event.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAreArray;

constexpr int32_t kBlockSize = 4;

KvCacheManager Manager(int32_t num_blocks, bool caching = true) {
  return KvCacheManager(KvCacheConfig{
      .num_blocks = num_blocks, .block_size = kBlockSize, .enable_prefix_caching = caching});
}

void Admit(KvCacheManager& cache, int64_t seq_id, const std::vector<int32_t>& tokens,
           const std::string& salt = "") {
  const CacheRequest req{.seq_id = seq_id, .token_ids = tokens, .cache_salt = salt};
  const ComputedBlocks hits = cache.GetComputedBlocks(req);
  const auto num_new = static_cast<int32_t>(tokens.size()) - hits.num_computed_tokens;
  ASSERT_TRUE(cache.AllocateSlots(req, 0, num_new, &hits).has_value());
}

TEST(KvEventsTest, NothingIsRecordedUntilEnabled) {
  KvCacheManager cache = Manager(8);
  Admit(cache, 1, Tokens(9));
  EXPECT_THAT(cache.TakeEvents(), IsEmpty());
  EXPECT_THAT(cache.CachedBlockHashes(), SizeIs(2));
}

TEST(KvEventsTest, APromptStoresItsFullBlocksInOneEvent) {
  KvCacheManager cache = Manager(8);
  cache.EnableEvents();
  const std::vector<int32_t> tokens = Tokens(10);
  Admit(cache, 1, tokens, "tenant-a");
  const std::vector<KvEvent> events = cache.TakeEvents();
  ASSERT_THAT(events, SizeIs(1));
  const KvEvent& stored = events[0];
  EXPECT_EQ(stored.kind, KvEvent::Kind::kBlockStored);
  const BlockHash first = HashBlockTokens({}, Tokens(4), "tenant-a");
  const BlockHash second = HashBlockTokens(first, Tokens(4, 104), "tenant-a");
  EXPECT_THAT(stored.block_hashes, ElementsAre(first, second));
  EXPECT_FALSE(stored.parent_block_hash.has_value()) << "a sequence's first block has no parent";
  EXPECT_THAT(stored.token_ids, ElementsAreArray(Tokens(8)));
  EXPECT_EQ(stored.block_size, kBlockSize);
  EXPECT_EQ(stored.cache_salt, "tenant-a");
  EXPECT_THAT(cache.TakeEvents(), IsEmpty()) << "taken events are gone";
}

TEST(KvEventsTest, ABlockFilledByDecodeNamesItsParent) {
  KvCacheManager cache = Manager(8);
  cache.EnableEvents();
  std::vector<int32_t> tokens = Tokens(7);
  Admit(cache, 1, tokens);
  const std::vector<KvEvent> prompt = cache.TakeEvents();
  ASSERT_THAT(prompt, SizeIs(1));
  tokens.push_back(7);
  const CacheRequest req{.seq_id = 1, .token_ids = tokens, .cache_salt = ""};
  ASSERT_TRUE(cache.AllocateSlots(req, 7, 1).has_value());
  const std::vector<KvEvent> decode = cache.TakeEvents();
  ASSERT_THAT(decode, SizeIs(1));
  EXPECT_EQ(decode[0].parent_block_hash, prompt[0].block_hashes.back());
  EXPECT_THAT(decode[0].token_ids, ElementsAre(104, 105, 106, 7));
}

TEST(KvEventsTest, HitsAndDuplicatesStoreNothing) {
  KvCacheManager cache = Manager(16);
  cache.EnableEvents();
  // Two sequences computing the same prompt in one step: the second's
  // blocks duplicate the first's and stay out of the index.
  const std::vector<int32_t> tokens = Tokens(9);
  const CacheRequest a{.seq_id = 1, .token_ids = tokens, .cache_salt = ""};
  const CacheRequest b{.seq_id = 2, .token_ids = tokens, .cache_salt = ""};
  ASSERT_TRUE(cache.AllocateSlots(a, 0, 9).has_value());
  ASSERT_TRUE(cache.AllocateSlots(b, 0, 9).has_value());
  EXPECT_THAT(cache.TakeEvents(), SizeIs(1));
  // A later request hits both blocks.
  Admit(cache, 3, tokens);
  EXPECT_THAT(cache.TakeEvents(), IsEmpty());
  // The same tokens under another salt are another prefix.
  Admit(cache, 4, tokens, "other");
  const std::vector<KvEvent> salted = cache.TakeEvents();
  ASSERT_THAT(salted, SizeIs(1));
  EXPECT_EQ(salted[0].cache_salt, "other");
}

TEST(KvEventsTest, EvictionIsRecordedBeforeTheBlocksThatReplaceIt) {
  KvCacheManager cache = Manager(4);  // 3 usable blocks
  cache.EnableEvents();
  Admit(cache, 1, Tokens(12));
  const std::vector<KvEvent> first = cache.TakeEvents();
  ASSERT_THAT(first, SizeIs(1));
  ASSERT_THAT(first[0].block_hashes, SizeIs(3));
  cache.Free(1);
  EXPECT_THAT(cache.TakeEvents(), IsEmpty()) << "a freed block stays cached";
  Admit(cache, 2, Tokens(8, 500));
  const std::vector<KvEvent> events = cache.TakeEvents();
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kBlockRemoved);
  // The tail of the freed sequence is evicted first.
  EXPECT_THAT(events[0].block_hashes,
              ElementsAre(first[0].block_hashes[2], first[0].block_hashes[1]));
  EXPECT_EQ(events[1].kind, KvEvent::Kind::kBlockStored);
  EXPECT_THAT(events[1].block_hashes, SizeIs(2));
}

TEST(KvEventsTest, NoEventsWithoutPrefixCaching) {
  KvCacheManager cache = Manager(4, /*caching=*/false);
  cache.EnableEvents();
  Admit(cache, 1, Tokens(12));
  cache.Free(1);
  Admit(cache, 2, Tokens(12, 7));
  EXPECT_THAT(cache.TakeEvents(), IsEmpty());
}

// A consumer of the events: the set of cached hashes they add up to, with
// each event checked against that set and its run's hash chain.
class Follower {
 public:
  void Apply(const KvEvent& event) {
    switch (event.kind) {
      case KvEvent::Kind::kBlockStored: {
        ASSERT_FALSE(event.block_hashes.empty());
        ASSERT_EQ(event.token_ids.size(), event.block_hashes.size() * kBlockSize);
        BlockHash parent = event.parent_block_hash.value_or(BlockHash{});
        for (size_t i = 0; i < event.block_hashes.size(); ++i) {
          const std::span<const int32_t> tokens =
              std::span(event.token_ids).subspan(i * kBlockSize, kBlockSize);
          EXPECT_EQ(HashBlockTokens(parent, tokens, event.cache_salt), event.block_hashes[i])
              << "a stored block's hash is its parent's, tokens' and salt's";
          EXPECT_TRUE(cached_.insert(event.block_hashes[i]).second) << "stored twice";
          parent = event.block_hashes[i];
        }
        ++num_stored_;
        break;
      }
      case KvEvent::Kind::kBlockRemoved:
        for (const BlockHash& hash : event.block_hashes) {
          EXPECT_EQ(cached_.erase(hash), 1u) << "removed a block that was never stored";
        }
        ++num_removed_;
        break;
      case KvEvent::Kind::kAllBlocksCleared:
        cached_.clear();
        break;
    }
  }

  [[nodiscard]] std::vector<BlockHash> cached() const { return {cached_.begin(), cached_.end()}; }
  [[nodiscard]] int num_stored() const { return num_stored_; }
  [[nodiscard]] int num_removed() const { return num_removed_; }

 private:
  absl::flat_hash_set<BlockHash> cached_;
  int num_stored_ = 0;
  int num_removed_ = 0;
};

TEST(KvEventsTest, ReplayingTheEventsRebuildsThePrefixIndex) {
  KvCacheManager cache = Manager(48);
  cache.EnableEvents();
  Follower follower;
  std::mt19937 rng(7);
  // Prompts share a few prefixes, so hits, duplicates and evictions all occur.
  const std::vector<std::vector<int32_t>> prefixes = {Tokens(8, 0), Tokens(12, 50), Tokens(5, 90)};
  const std::vector<std::string> salts = {"", "", "a", "b"};
  struct Seq {
    std::vector<int32_t> tokens;
    std::string salt;
    int32_t num_computed = 0;
  };
  absl::flat_hash_map<int64_t, Seq> live;
  int64_t next_id = 1;
  for (int op = 0; op < 4000; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 3 || live.empty()) {
      Seq seq;
      seq.tokens = prefixes[std::uniform_int_distribution<size_t>(0, prefixes.size() - 1)(rng)];
      const int suffix = std::uniform_int_distribution<int>(0, 9)(rng);
      for (int i = 0; i < suffix; ++i) {
        seq.tokens.push_back(std::uniform_int_distribution<int32_t>(0, 3)(rng));
      }
      seq.salt = salts[std::uniform_int_distribution<size_t>(0, salts.size() - 1)(rng)];
      const CacheRequest req{.seq_id = next_id, .token_ids = seq.tokens, .cache_salt = seq.salt};
      const ComputedBlocks hits = cache.GetComputedBlocks(req);
      const auto num_new = static_cast<int32_t>(seq.tokens.size()) - hits.num_computed_tokens;
      if (cache.AllocateSlots(req, 0, num_new, &hits).has_value()) {
        seq.num_computed = static_cast<int32_t>(seq.tokens.size());
        live.emplace(next_id, std::move(seq));
      }
      ++next_id;
    } else if (kind < 8) {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      Seq& seq = it->second;
      seq.tokens.push_back(std::uniform_int_distribution<int32_t>(0, 3)(rng));
      const CacheRequest req{.seq_id = it->first, .token_ids = seq.tokens, .cache_salt = seq.salt};
      if (cache.AllocateSlots(req, seq.num_computed, 1).has_value()) {
        ++seq.num_computed;
      } else {
        seq.tokens.pop_back();
      }
    } else {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      cache.Free(it->first);
      live.erase(it);
    }
    for (const KvEvent& event : cache.TakeEvents()) {
      follower.Apply(event);
    }
    ASSERT_THAT(follower.cached(), UnorderedElementsAreArray(cache.CachedBlockHashes()))
        << "after op " << op;
  }
  cache.CheckInvariants();
  EXPECT_GT(follower.num_stored(), 100);
  EXPECT_GT(follower.num_removed(), 100) << "the workload must evict";
}

}  // namespace
}  // namespace loom
