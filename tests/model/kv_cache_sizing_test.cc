#include "model/kv_cache_sizing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace loom {
namespace {

using ::testing::ElementsAre;

// Llama-3-8B: 32 layers, 8 KV heads of 128, bf16.
KvCacheSpec Llama3_8B() {
  return KvCacheSpec{
      .num_layers = 32, .num_kv_heads = 8, .head_dim = 128, .block_size = 16, .dtype_bytes = 2};
}

TEST(KvCacheSizingTest, BytesPerBlockCountsKAndVOfEveryLayer) {
  // 128 KiB per token (BENCHMARKS.md) x 16 tokens.
  EXPECT_EQ(KvBytesPerBlock(Llama3_8B()), 16 * 128 * 1024);
  EXPECT_EQ(KvBufferBytes(Llama3_8B(), 10), 10 * 2 * 8 * 128 * 16 * 2);
}

TEST(KvCacheSizingTest, BudgetGivesWholeBlocksIncludingTheNullBlock) {
  const KvCacheSpec spec = Llama3_8B();
  const int64_t per_block = KvBytesPerBlock(spec);
  EXPECT_EQ(NumBlocksForBudget(spec, 100 * per_block), 100);
  EXPECT_EQ(NumBlocksForBudget(spec, 100 * per_block + per_block - 1), 100);
  EXPECT_EQ(NumBlocksForBudget(spec, per_block - 1), 0);
  EXPECT_EQ(NumBlocksForBudget(spec, 0), 0);
  EXPECT_EQ(NumBlocksForBudget(spec, -5), 0);
  // 100 GiB of KV on an H200 after the weights.
  EXPECT_EQ(NumBlocksForBudget(spec, int64_t{100} << 30), 51200);
}

TEST(KvCacheSizingTest, HugeBudgetsAreCapped) {
  KvCacheSpec tiny{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .block_size = 1, .dtype_bytes = 1};
  EXPECT_EQ(NumBlocksForBudget(tiny, int64_t{1} << 40), std::numeric_limits<int32_t>::max());
}

TEST(KvCacheSizingTest, SharedLayersTakeNoMemoryAndViewTheirOwner) {
  KvCacheSpec spec = Llama3_8B();
  spec.num_layers = 6;
  // Layers 3..5 reuse earlier layers' KV; 5 points at 4, which points at 1.
  spec.kv_sharing = {-1, -1, -1, 0, 1, 4};
  ASSERT_TRUE(ValidateKvCacheSpec(spec).ok());
  EXPECT_THAT(KvBufferOwners(spec), ElementsAre(0, 1, 2, 0, 1, 1));
  EXPECT_EQ(KvBytesPerBlock(spec), 3 * 2 * 8 * 128 * 16 * 2);
  KvCacheSpec unshared = spec;
  unshared.kv_sharing.clear();
  EXPECT_THAT(KvBufferOwners(unshared), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(NumBlocksForBudget(spec, 2 * KvBytesPerBlock(unshared)), 4);
}

TEST(KvCacheSizingTest, ValidationRejectsBadSpecs) {
  KvCacheSpec spec = Llama3_8B();
  spec.head_dim = 0;
  EXPECT_EQ(ValidateKvCacheSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  spec = Llama3_8B();
  spec.kv_sharing = {-1, -1};
  EXPECT_EQ(ValidateKvCacheSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  spec.num_layers = 2;
  EXPECT_TRUE(ValidateKvCacheSpec(spec).ok());
  spec.kv_sharing = {-1, 1};  // itself
  EXPECT_EQ(ValidateKvCacheSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  spec.kv_sharing = {1, -1};  // a later layer
  EXPECT_EQ(ValidateKvCacheSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  spec.kv_sharing = {-1, -2};
  EXPECT_EQ(ValidateKvCacheSpec(spec).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
