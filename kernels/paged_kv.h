// The paged KV view shared by the CPU reference and the CUDA kernels (as
// FlashInfer's paged_kv_t): one layer's K and V pools plus the step's block
// tables, context lengths and per-token positions and cache slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.h"

namespace loom::kernels {

// Layout of one layer's pools, K and V alike:
//   cache[num_blocks][num_kv_heads][block_size][head_dim]
// Position p of sequence s lives in block block_tables[s * max_blocks_per_seq +
// (p / block_size) * block_stride], slot p % block_size: a table row may
// interleave the tables of several layer groups (types/kv_cache_layout.h),
// block_tables pointing at a layer's first entry. Block 0 is the null block.
//
// The step's query tokens are packed sequence after sequence (cu_seqlens
// style): sequence s owns token rows [query_start[s], query_start[s + 1]).
// Token t sits at absolute position positions[t] of its sequence and attends
// causally to positions [0, positions[t]], or with a sliding window W > 0 to
// (positions[t] - W, positions[t]] only (blocks wholly before every query's
// window may be the null block); its K/V are written to the flat slot
// slot_mapping[t] = block_id * block_size + p % block_size.
template <typename T>
struct PagedKv {
  T* k_cache = nullptr;
  T* v_cache = nullptr;
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;

  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;         // table entries per row
  // Tokens in the cache for each sequence once this step's K/V are written
  // (num_computed_tokens + num_scheduled_tokens).
  const int32_t* context_lens = nullptr;  // [num_seqs]
  const int32_t* query_start = nullptr;   // [num_seqs + 1]
  int32_t num_seqs = 0;

  const int32_t* positions = nullptr;     // [num_tokens]
  const int32_t* slot_mapping = nullptr;  // [num_tokens]
  int32_t num_tokens = 0;
  int32_t sliding_window = 0;  // 0: full causal attention
  int32_t block_stride = 1;    // table entries from one block of positions to the next

  // The first position query position `pos` attends to.
  LOOM_HOST_DEVICE int32_t WindowStart(int32_t pos) const {
    return sliding_window > 0 && pos >= sliding_window ? pos - sliding_window + 1 : 0;
  }

  // Element offset of (block, kv_head, slot, 0) in k_cache / v_cache.
  LOOM_HOST_DEVICE size_t Offset(int32_t block, int32_t kv_head, int32_t slot) const {
    return ((static_cast<size_t>(block) * num_kv_heads + kv_head) * block_size + slot) *
           static_cast<size_t>(head_dim);
  }
  // Element offset of position `pos` of sequence `seq` for `kv_head`.
  LOOM_HOST_DEVICE size_t PositionOffset(int32_t seq, int32_t kv_head, int32_t pos) const {
    const int32_t block = block_tables[static_cast<size_t>(seq) * max_blocks_per_seq +
                                       static_cast<size_t>(pos / block_size) * block_stride];
    return Offset(block, kv_head, pos % block_size);
  }
  // Element offset of flat slot `slot` (from slot_mapping) for `kv_head`.
  LOOM_HOST_DEVICE size_t SlotOffset(int32_t slot, int32_t kv_head) const {
    return Offset(slot / block_size, kv_head, slot % block_size);
  }
};

}  // namespace loom::kernels
