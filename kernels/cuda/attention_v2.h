// The second paged decode attention kernel (v2), selectable beside v1
// (kernels/cuda/ops.h PagedAttention) with --attention_kernel. Same params,
// same paged KV view and same split-K partition/reduce scheme as v1; it differs
// in how it moves data: the GQA group's query heads live in registers, the
// partition's block-table entries are staged in shared memory, positions map to
// blocks by shift and mask (block_size a power of two), and K/V tiles are
// copied to shared memory with cp.async, double-buffered, while the previous
// tile is computed. Each warp keeps its own online softmax over its rows of
// every tile; the block combines its warps at the end.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention.h"

namespace loom::kernels::cuda {

enum class AttentionKernel { kV1, kV2 };

// v2 serves pure decode steps (one query token per sequence) over the whole
// context of a plain table; every other step, sliding-window layers and
// interleaved tables of several layer groups keep v1. Host-only,
// so the dispatch is unit-tested without a GPU.
template <typename T>
bool AttentionV2Applies(const PagedAttentionParams<T>& p) {
  const int32_t bs = p.kv.block_size;
  return p.kv.num_tokens > 0 && p.kv.num_tokens == p.kv.num_seqs && bs > 0 &&
         (bs & (bs - 1)) == 0 && p.kv.sliding_window == 0 && p.kv.block_stride == 1;
}

// Launch grid of v2: (token, kv head, partition slot). Partitions past
// grid.z are covered by a grid-stride loop, so grid.z stays within CUDA's limit.
dim3 AttentionV2Grid(int32_t num_tokens, int32_t num_kv_heads, int32_t partition_size,
                     int32_t max_partitions);

// Enqueues v2 on `stream`. cudaErrorInvalidValue for a step or shape it does not
// take (AttentionV2Applies false, head_dim not 16/32/64/128, more than 8 query
// heads per kv head, a missing workspace), else the launch's error.
template <typename T>
cudaError_t PagedAttentionV2(const PagedAttentionParams<T>& p, cudaStream_t stream);

}  // namespace loom::kernels::cuda
