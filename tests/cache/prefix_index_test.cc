#include "cache/prefix_index.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

// Hashes whose low 32 bits collide in the home slot, so probe runs form and
// deletions have to shift entries back.
BlockHash Colliding(uint64_t i) { return BlockHash{.lo = 5, .hi = i}; }

TEST(PrefixIndexTest, FindsWhatWasInsertedAndNothingElse) {
  std::vector<BlockHash> hashes(8);
  const auto hash_of = [&](BlockId id) { return hashes[static_cast<size_t>(id)]; };
  PrefixIndex index(8);
  hashes[1] = Colliding(1);
  hashes[2] = Colliding(2);
  EXPECT_TRUE(index.Insert(hashes[1], 1, hash_of));
  EXPECT_TRUE(index.Insert(hashes[2], 2, hash_of));
  // A second block with the same prefix is not entered.
  hashes[3] = Colliding(1);
  EXPECT_FALSE(index.Insert(hashes[3], 3, hash_of));
  EXPECT_EQ(index.Find(Colliding(1), hash_of), 1);
  EXPECT_EQ(index.Find(Colliding(2), hash_of), 2);
  EXPECT_EQ(index.Find(Colliding(9), hash_of), PrefixIndex::kNoBlock);
  EXPECT_EQ(index.size(), 2);
  index.Erase(hashes[1], 1);
  EXPECT_EQ(index.Find(Colliding(1), hash_of), PrefixIndex::kNoBlock);
  EXPECT_EQ(index.Find(Colliding(2), hash_of), 2);
  index.Erase(hashes[2], 2);
  EXPECT_TRUE(index.empty());
  EXPECT_EQ(index.Find(Colliding(2), hash_of), PrefixIndex::kNoBlock);
}

// Random inserts and erases with many home collisions and runs that wrap
// around the table's end, checked against a reference map.
TEST(PrefixIndexTest, MatchesReferenceUnderChurn) {
  constexpr int32_t kNumBlocks = 64;
  std::vector<BlockHash> hashes(kNumBlocks);
  const auto hash_of = [&](BlockId id) { return hashes[static_cast<size_t>(id)]; };
  PrefixIndex index(kNumBlocks);
  std::unordered_map<BlockId, uint64_t> entered;  // id -> key number
  std::mt19937_64 rng(3);
  for (int step = 0; step < 20000; ++step) {
    const auto id = static_cast<BlockId>(rng() % kNumBlocks);
    if (entered.contains(id)) {
      index.Erase(hashes[static_cast<size_t>(id)], id);
      entered.erase(id);
    } else {
      const uint64_t key = rng() % 256;
      // Homes in the last few slots make probe runs wrap around.
      hashes[static_cast<size_t>(id)] = BlockHash{.lo = 124 + key % 8, .hi = key};
      const bool duplicate = std::any_of(entered.begin(), entered.end(), [&](const auto& e) {
        return hashes[static_cast<size_t>(e.first)] == hashes[static_cast<size_t>(id)];
      });
      EXPECT_EQ(index.Insert(hashes[static_cast<size_t>(id)], id, hash_of), !duplicate);
      if (!duplicate) {
        entered.emplace(id, key);
      }
    }
    ASSERT_EQ(index.size(), static_cast<int32_t>(entered.size()));
    for (const auto& [entered_id, key] : entered) {
      ASSERT_EQ(index.Find(hashes[static_cast<size_t>(entered_id)], hash_of), entered_id);
    }
  }
}

}  // namespace
}  // namespace loom
