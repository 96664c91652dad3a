// Host-side sizing of the GPU kernels' launches and workspaces: plain C++ so
// that CPU unit tests cover it and the CUDA executor and launchers share it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::kernels {

// The largest grid.y (and grid.z) of a launch; kernels with one row per grid.y
// index walk rows past it with a grid-stride loop.
inline constexpr int64_t kMaxGridY = 65535;

// grid.y for `rows` rows: at most kMaxGridY, at least 1.
int32_t GridRows(int64_t rows);

// The split-K partition size for a decode batch of this size: enough (kv head,
// sequence, partition) blocks to cover an H200's 132 SMs a few times at 1k
// context, while long partitions keep the reduce small.
int32_t DecodePartitionSize(int32_t batch);

// ceil(context_len / partition_size): the partitions of a context.
int32_t NumPartitions(int32_t context_len, int32_t partition_size);

// Rows (decode token x partition) of the split-K workspace per query head:
// the maximum over batch sizes b <= max_seqs of b * NumPartitions(max_model_len,
// DecodePartitionSize(b)). A step of b sequences indexes its workspace as
// [token][head][NumPartitions(longest context, p(b))], which fits.
int64_t SplitKWorkspaceRows(int32_t max_seqs, int32_t max_model_len);

// One split-K decode attention launch. The workspace row stride is
// max_partitions; grid_z blocks walk the partitions with a grid-stride loop.
struct SplitKLaunch {
  int32_t partition_size = 0;
  int32_t max_partitions = 0;
  int32_t grid_z = 0;
};

// Eager steps: the stride from the step's longest context. Graph-captured
// steps (captured once, replayed at any context) use the stride of
// max_model_len. Either way the grid covers at most kPartitionGridContext
// tokens' partitions; longer contexts loop.
inline constexpr int32_t kPartitionGridContext = 8192;
// grid.z of the split-K kernel for a workspace stride of max_partitions.
int32_t SplitKGridZ(int32_t max_partitions, int32_t partition_size);
SplitKLaunch PlanSplitK(int32_t batch, int32_t longest_context, int32_t max_model_len, bool graph);

// Columns of a step's block table: enough blocks for its longest context.
int32_t BlockTableWidth(int32_t longest_context, int32_t block_size);

// Offsets (in int32 elements) of a step's inputs in the CUDA executor's upload
// buffer: token_cap token ids and positions, slot_entries runs of token_cap
// slots (one per table entry of a logical block), seq_cap + 1 query starts,
// seq_cap sample rows, then `seqs` block-table rows of `width` columns.
struct StepInputLayout {
  size_t token_ids = 0, positions = 0, slots = 0, query_start = 0, sample_rows = 0;
  size_t block_tables = 0, end = 0;
  size_t slot_pitch = 0;  // from one entry's slots to the next's
  StepInputLayout(int32_t token_cap, int32_t seq_cap, int32_t seqs, int32_t width,
                  int32_t slot_entries = 1);
};

// What a step uploads of its int32 inputs: everything before the block
// tables, then `rows` block-table rows of which only the first used_width
// columns (a strided copy when the layout's width is wider, as in graph
// replays).
struct StepUpload {
  size_t head_bytes = 0;       // [0, block_tables)
  size_t row_pitch_bytes = 0;  // the layout's width
  size_t row_bytes = 0;        // the used width
  int32_t rows = 0;
  size_t bytes() const { return head_bytes + row_bytes * static_cast<size_t>(rows); }
};
StepUpload PlanStepUpload(const StepInputLayout& layout, int32_t rows, int32_t width,
                          int32_t used_width);

}  // namespace loom::kernels
