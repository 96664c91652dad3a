// The decode attention kernel of PagedAttention on AVX2: one work item is
// one query token's heads that share a kv head, over one partition of its
// context. The scores of 8 positions come from 8 dot products summed across
// registers at once; the softmax runs on whole vectors; the value sums of up
// to 3 heads by 32 dimensions stay in registers while the partition's V rows
// stream by once per 32 dimensions. (The auto-vectorised loops it replaces
// summed each score lane by lane and kept the value sums in memory: about
// 9 GFLOP/s at 16 sequences of 512 positions.)
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace loom::kernels::cpu {

struct AttendItem {
  int32_t seq;
  int32_t token;
  int32_t kv_head;
  int32_t begin;  // first position of the partition
  int32_t end;    // one past its last position
};

// AVX2 and a head_dim that is a multiple of 8.
bool VectorDecodeSupported(int32_t head_dim);

// Attends the query heads of one kv head over positions [begin, end): writes
// unnormalised sums to acc [group, head_dim] and each head's max and exp-sum
// to max_out and sum_out [group]; scores holds [group, end - begin] floats.
void AttendItemVector(const PagedAttentionParams<float>& p, const AttendItem& it, float* scores,
                      float* acc, float* max_out, float* sum_out);

}  // namespace loom::kernels::cpu
