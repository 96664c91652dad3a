#include "kernels/launch_sizing.h"

#include <algorithm>
#include <cstddef>

namespace loom::kernels {

int32_t GridRows(int64_t rows) {
  return static_cast<int32_t>(std::clamp<int64_t>(rows, 1, kMaxGridY));
}

int32_t DecodePartitionSize(int32_t batch) {
  if (batch <= 4) return 64;
  if (batch <= 16) return 128;
  if (batch <= 64) return 256;
  return 512;
}

int32_t NumPartitions(int32_t context_len, int32_t partition_size) {
  return (context_len + partition_size - 1) / partition_size;
}

int64_t SplitKWorkspaceRows(int32_t max_seqs, int32_t max_model_len) {
  int64_t rows = 0;
  for (int32_t b = 1; b <= max_seqs; ++b) {
    rows =
        std::max<int64_t>(rows, int64_t{b} * NumPartitions(max_model_len, DecodePartitionSize(b)));
  }
  return rows;
}

int32_t SplitKGridZ(int32_t max_partitions, int32_t partition_size) {
  return std::max(1,
                  std::min(max_partitions, NumPartitions(kPartitionGridContext, partition_size)));
}

SplitKLaunch PlanSplitK(int32_t batch, int32_t longest_context, int32_t max_model_len, bool graph) {
  SplitKLaunch l;
  l.partition_size = DecodePartitionSize(batch);
  const int32_t context = graph ? max_model_len : std::min(longest_context, max_model_len);
  l.max_partitions = NumPartitions(std::max(context, 1), l.partition_size);
  l.grid_z = SplitKGridZ(l.max_partitions, l.partition_size);
  return l;
}

int32_t BlockTableWidth(int32_t longest_context, int32_t block_size) {
  return std::max<int32_t>(1, (longest_context + block_size - 1) / block_size);
}

namespace {
size_t AlignUp4(size_t n) { return (n + 3) / 4 * 4; }
}  // namespace

StepInputLayout::StepInputLayout(int32_t token_cap, int32_t seq_cap, int32_t seqs, int32_t width,
                                 int32_t slot_entries) {
  const auto tokens = static_cast<size_t>(token_cap), caps = static_cast<size_t>(seq_cap);
  positions = token_ids + tokens;
  slots = positions + tokens;
  slot_pitch = tokens;
  query_start = slots + tokens * static_cast<size_t>(slot_entries);
  sample_rows = query_start + caps + 1;
  block_tables = AlignUp4(sample_rows + caps);
  end = AlignUp4(block_tables + static_cast<size_t>(seqs) * static_cast<size_t>(width));
}

StepUpload PlanStepUpload(const StepInputLayout& layout, int32_t rows, int32_t width,
                          int32_t used_width) {
  StepUpload u;
  u.head_bytes = layout.block_tables * 4;
  u.row_pitch_bytes = static_cast<size_t>(width) * 4;
  u.row_bytes = static_cast<size_t>(std::min(used_width, width)) * 4;
  u.rows = rows;
  return u;
}

}  // namespace loom::kernels
