#include <gtest/gtest.h>

#include "tests/cache/mixed_workload.h"

namespace loom {
namespace {

TEST(SlotUtilisationTest, MixedLengthWorkloadFillsAtLeast96PercentOfSlotsAtPeak) {
  const MixedWorkloadOptions options{.num_requests = 600};
  const SlotUtilisation result = RunMixedWorkload(options);
  EXPECT_EQ(result.num_finished, options.num_requests);
  EXPECT_EQ(result.used_blocks_at_end, 0);
  // The peak is a full pool: the workload is heavy enough to preempt.
  EXPECT_GT(result.num_preemptions, 0);
  EXPECT_GE(result.slots_allocated, int64_t{options.num_blocks - 64} * options.block_size);
  EXPECT_GE(result.ratio(), 0.96) << result.tokens_stored << " / " << result.slots_allocated;
}

}  // namespace
}  // namespace loom
