#include "cache/block_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace loom {
namespace {

static_assert(!std::is_convertible_v<BlockHash, uint64_t>);
static_assert(!std::is_convertible_v<uint64_t, BlockHash>);

const std::vector<int32_t> kTokens = {11, 22, 33, 44};

TEST(BlockHashTest, SameInputsGiveSameHash) {
  EXPECT_EQ(HashBlockTokens({}, kTokens, ""), HashBlockTokens({}, kTokens, ""));
  EXPECT_EQ(HashBlockTokens({1, 2}, kTokens, "salt"), HashBlockTokens({1, 2}, kTokens, "salt"));
}

TEST(BlockHashTest, EveryInputChangesTheHash) {
  const BlockHash base = HashBlockTokens({}, kTokens, "");
  EXPECT_NE(base, BlockHash{});
  EXPECT_NE(base, HashBlockTokens({}, std::vector<int32_t>{11, 22, 33, 45}, ""));
  EXPECT_NE(base, HashBlockTokens({}, std::vector<int32_t>{22, 11, 33, 44}, ""));
  EXPECT_NE(base, HashBlockTokens(BlockHash{.lo = 1}, kTokens, ""));
  EXPECT_NE(base, HashBlockTokens(BlockHash{.hi = 1}, kTokens, ""));
  EXPECT_NE(base, HashBlockTokens({}, kTokens, "tenant-a"));
  EXPECT_NE(HashBlockTokens({}, kTokens, "tenant-a"), HashBlockTokens({}, kTokens, "tenant-b"));
}

TEST(BlockHashTest, ChainDistinguishesEqualBlocksWithDifferentPrefixes) {
  const BlockHash first_a = HashBlockTokens({}, std::vector<int32_t>{1, 2, 3, 4}, "");
  const BlockHash first_b = HashBlockTokens({}, std::vector<int32_t>{5, 6, 7, 8}, "");
  EXPECT_NE(HashBlockTokens(first_a, kTokens, ""), HashBlockTokens(first_b, kTokens, ""));
}

TEST(BlockHashTest, UsesBothHalves) {
  const BlockHash hash = HashBlockTokens({}, kTokens, "");
  EXPECT_NE(hash.lo, 0U);
  EXPECT_NE(hash.hi, 0U);
  EXPECT_NE(hash.lo, hash.hi);
}

TEST(BlockHashTest, WorksAsAbseilHashKey) {
  absl::flat_hash_set<BlockHash> set;
  BlockHash parent;
  for (int32_t i = 0; i < 1000; ++i) {
    parent = HashBlockTokens(parent, std::vector<int32_t>{i, i, i, i}, "");
    EXPECT_TRUE(set.insert(parent).second);
  }
  EXPECT_EQ(set.size(), 1000U);
  EXPECT_TRUE(set.contains(parent));
  EXPECT_FALSE(set.contains(BlockHash{}));
}

}  // namespace
}  // namespace loom
