// Paged attention over the KV pool for a packed step of prefill chunks and
// decodes. Every query token t of sequence s attends to positions
// [kv.WindowStart(p), p] of s, p = kv.positions[t], through its block table,
// so a prefill chunk sees the cached prefix (or its window) and is causal
// within itself; a decode is the one-token case.
// Grouped-query attention: query head h reads kv head h / (num_heads / num_kv_heads).
//
// Long contexts are split into partitions of partition_size positions
// (flash-decoding): each (token, head, partition) produces an unnormalised
// partial output with its running max and exp-sum in the workspace, and a
// reduce combines them. partition_size = 0 disables the split.
#pragma once

#include <cstdint>

#include "kernels/paged_kv.h"

namespace loom::kernels {

class ParallelFor;

template <typename T>
struct PagedAttentionParams {
  const T* q = nullptr;  // [num_tokens, num_heads, head_dim], row stride q_stride
  T* out = nullptr;      // [num_tokens, num_heads, head_dim], row stride out_stride
  int32_t q_stride = 0;
  int32_t out_stride = 0;
  int32_t num_heads = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  PagedKv<T> kv;       // caches already hold this step's K/V

  // Split-K workspace, needed when partition_size > 0. max_partitions must be
  // >= ceil(max context length / partition_size); partition_size is a multiple
  // of kv.block_size.
  int32_t partition_size = 0;
  int32_t max_partitions = 0;
  float* partial_out = nullptr;  // [num_tokens, num_heads, max_partitions, head_dim]
  float* partial_max = nullptr;  // [num_tokens, num_heads, max_partitions]
  float* partial_sum = nullptr;  // [num_tokens, num_heads, max_partitions]
};

namespace cpu {
// Straightforward two-pass softmax per (token, head); ignores the workspace.
void PagedAttentionRef(const PagedAttentionParams<float>& p);
// Online softmax, threaded over (token, head, partition), then the reduce.
void PagedAttention(const PagedAttentionParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
