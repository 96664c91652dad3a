// Host sizing of the GPU launches and workspaces (kernels/launch_sizing.h).
#include "kernels/launch_sizing.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace loom::kernels {
namespace {

constexpr int32_t kLongContext = 131072;

// Every batch size's decode must index inside the workspace, and the workspace
// is no larger than the largest of them.
TEST(LaunchSizingTest, SplitKWorkspaceHoldsExactlyTheLargestDecode) {
  for (int32_t max_seqs : {1, 7, 64, 256}) {
    for (int32_t len : {1, 1000, 4096, kLongContext}) {
      const int64_t rows = SplitKWorkspaceRows(max_seqs, len);
      int64_t largest = 0;
      for (int32_t b = 1; b <= max_seqs; ++b) {
        const SplitKLaunch l = PlanSplitK(b, len, len, /*graph=*/true);
        EXPECT_LE(int64_t{b} * l.max_partitions, rows) << b << " " << len;
        largest = std::max(largest, int64_t{b} * l.max_partitions);
      }
      EXPECT_EQ(rows, largest);
    }
  }
}

// At a 131k context with 256 sequences, 32 heads of dim 128: the rows the
// kernel indexes are a fraction of max_seqs x (partitions of a batch of one).
TEST(LaunchSizingTest, SplitKWorkspaceAtLongContextIsNotMaxSeqsTimesMaxPartitions) {
  const int64_t rows = SplitKWorkspaceRows(256, kLongContext);
  const int64_t unindexed = int64_t{256} * NumPartitions(kLongContext, DecodePartitionSize(1));
  EXPECT_LE(rows * 4, unindexed);
  const int64_t bytes = rows * 32 * (128 + 2) * 4;
  EXPECT_LT(bytes, int64_t{2} << 30);  // the unindexed sizing needs 8.6 GB
}

TEST(LaunchSizingTest, EagerPartitionsFollowTheStepsLongestContext) {
  const SplitKLaunch l = PlanSplitK(1, 1000, kLongContext, /*graph=*/false);
  EXPECT_EQ(l.partition_size, DecodePartitionSize(1));
  EXPECT_EQ(l.max_partitions, NumPartitions(1000, l.partition_size));
  EXPECT_EQ(l.grid_z, l.max_partitions);
}

TEST(LaunchSizingTest, PartitionGridIsCappedAndLongContextsLoop) {
  for (bool graph : {false, true}) {
    const SplitKLaunch l = PlanSplitK(1, kLongContext, kLongContext, graph);
    EXPECT_EQ(l.max_partitions, NumPartitions(kLongContext, l.partition_size));
    EXPECT_EQ(l.grid_z, NumPartitions(kPartitionGridContext, l.partition_size));
    EXPECT_LT(l.grid_z, l.max_partitions);
    EXPECT_LE(l.grid_z, kMaxGridY);
  }
  // A graph is captured once: its stride covers max_model_len whatever the step.
  EXPECT_EQ(PlanSplitK(8, 10, kLongContext, /*graph=*/true).max_partitions,
            NumPartitions(kLongContext, DecodePartitionSize(8)));
}

TEST(LaunchSizingTest, GridRowsStayWithinTheLaunchLimit) {
  EXPECT_EQ(GridRows(0), 1);
  EXPECT_EQ(GridRows(100), 100);
  EXPECT_EQ(GridRows(kMaxGridY), kMaxGridY);
  EXPECT_EQ(GridRows(70000), kMaxGridY);
  EXPECT_EQ(GridRows(int64_t{1} << 40), kMaxGridY);
}

TEST(LaunchSizingTest, BlockTableWidthCoversTheLongestContext) {
  EXPECT_EQ(BlockTableWidth(1, 16), 1);
  EXPECT_EQ(BlockTableWidth(16, 16), 1);
  EXPECT_EQ(BlockTableWidth(17, 16), 2);
  EXPECT_EQ(BlockTableWidth(kLongContext, 16), kLongContext / 16);
}

// A step of 4 short sequences packs 4 rows of its own width, not
// max_model_len / block_size columns each.
TEST(LaunchSizingTest, PackedBlockTablesUseTheStepsWidth) {
  const int32_t width = BlockTableWidth(100, 16);
  const StepInputLayout step(40, 4, 4, width);
  EXPECT_EQ(step.end - step.block_tables, size_t{28});  // 4 x 7, a multiple of 4
  const StepInputLayout full(40, 4, 4, BlockTableWidth(kLongContext, 16));
  EXPECT_EQ(full.end - full.block_tables, size_t{4} * 8192);
  EXPECT_LT(step.end * 4, size_t{1024});
  // Regions follow one another without overlap.
  EXPECT_EQ(step.positions, size_t{40});
  EXPECT_EQ(step.slots, size_t{80});
  EXPECT_EQ(step.query_start, size_t{120});
  EXPECT_EQ(step.sample_rows, size_t{125});
  EXPECT_EQ(step.block_tables % 4, size_t{0});
  EXPECT_GE(step.block_tables, step.sample_rows + 4);
}

// A graph replay keeps its captured full-width layout but uploads only the
// columns the step's longest context needs.
TEST(LaunchSizingTest, GraphStepsUploadOnlyTheUsedColumns) {
  const int32_t full = BlockTableWidth(kLongContext, 16);
  const StepInputLayout graph(256, 256, 256, full);
  const StepUpload upload = PlanStepUpload(graph, 256, full, BlockTableWidth(100, 16));
  EXPECT_EQ(upload.head_bytes, graph.block_tables * 4);
  EXPECT_EQ(upload.row_pitch_bytes, size_t{4} * full);
  EXPECT_EQ(upload.row_bytes, size_t{4} * 7);
  EXPECT_EQ(upload.bytes(), graph.block_tables * 4 + size_t{256} * 7 * 4);
  EXPECT_LT(upload.bytes() * 100, graph.end * 4);  // the full layout is 8 MiB
  // Never more columns than the layout has.
  EXPECT_EQ(PlanStepUpload(graph, 1, 3, 9).row_bytes, size_t{12});
}

}  // namespace
}  // namespace loom::kernels
