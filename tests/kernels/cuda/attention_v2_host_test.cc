// Host-side parts of the v2 decode attention: which steps it takes, its launch
// grid, and the shapes it refuses before touching the device.
#include <cuda_bf16.h>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_v2.h"

namespace loom::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

// A decode step of `seqs` sequences, Llama-3-8B heads, with a workspace
// pointer that is never dereferenced on these paths.
PagedAttentionParams<bf16> Decode(int seqs, int block_size) {
  static float fake_workspace;
  PagedAttentionParams<bf16> p;
  p.num_heads = 32;
  p.q_stride = p.out_stride = 32 * 128;
  p.kv.num_kv_heads = 8;
  p.kv.head_dim = 128;
  p.kv.block_size = block_size;
  p.kv.num_seqs = p.kv.num_tokens = seqs;
  p.partition_size = 64;
  p.max_partitions = 16;
  p.partial_out = p.partial_max = p.partial_sum = &fake_workspace;
  return p;
}

TEST(AttentionV2Host, AppliesToDecodeStepsWithPowerOfTwoBlocks) {
  EXPECT_TRUE(AttentionV2Applies(Decode(1, 16)));
  EXPECT_TRUE(AttentionV2Applies(Decode(256, 8)));
  EXPECT_TRUE(AttentionV2Applies(Decode(3, 256)));
  EXPECT_FALSE(AttentionV2Applies(Decode(3, 12)));
  EXPECT_FALSE(AttentionV2Applies(Decode(0, 16)));
  PagedAttentionParams<bf16> prefill = Decode(2, 16);
  prefill.kv.num_tokens = 40;
  EXPECT_FALSE(AttentionV2Applies(prefill));
}

TEST(AttentionV2Host, GridCoversPartitionsWithinTheLimit) {
  const dim3 split = AttentionV2Grid(64, 8, 256, 5);
  EXPECT_EQ(split.x, 64u);
  EXPECT_EQ(split.y, 8u);
  EXPECT_EQ(split.z, 5u);
  EXPECT_EQ(AttentionV2Grid(7, 2, 0, 0).z, 1u);
  EXPECT_EQ(AttentionV2Grid(1, 1, 64, 2048).z, 2048u);
  EXPECT_EQ(AttentionV2Grid(1, 1, 16, 100000).z, 65535u);
}

TEST(AttentionV2Host, RefusesStepsAndShapesItDoesNotTake) {
  PagedAttentionParams<bf16> prefill = Decode(2, 16);
  prefill.kv.num_tokens = 40;
  EXPECT_EQ(PagedAttentionV2(prefill, nullptr), cudaErrorInvalidValue);
  PagedAttentionParams<bf16> odd_dim = Decode(2, 16);
  odd_dim.kv.head_dim = 96;
  EXPECT_EQ(PagedAttentionV2(odd_dim, nullptr), cudaErrorInvalidValue);
  PagedAttentionParams<bf16> wide_group = Decode(2, 16);
  wide_group.num_heads = 16 * 8;
  EXPECT_EQ(PagedAttentionV2(wide_group, nullptr), cudaErrorInvalidValue);
  PagedAttentionParams<bf16> no_workspace = Decode(2, 16);
  no_workspace.partial_sum = nullptr;
  EXPECT_EQ(PagedAttentionV2(no_workspace, nullptr), cudaErrorInvalidValue);
  PagedAttentionParams<bf16> ragged_partition = Decode(2, 16);
  ragged_partition.partition_size = 40;
  EXPECT_EQ(PagedAttentionV2(ragged_partition, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace loom::kernels::cuda
