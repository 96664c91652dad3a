// Sizes the KV pool from a byte budget and the model's geometry. Layers may
// reuse another layer's KV (a cross-layer sharing map); only layers that own
// their KV take memory, and each layer is told which buffer to view.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace loom {

struct KvCacheSpec {
  int32_t num_layers;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  int32_t dtype_bytes;
  // layer -> an earlier layer whose KV it reuses, or -1 for its own; empty
  // means every layer owns its KV.
  std::vector<int32_t> kv_sharing = {};
};

// OK when every dimension is positive and kv_sharing is empty or has one entry
// per layer, each -1 or an earlier layer. The functions below require a valid
// spec (they abort otherwise), so check specs read from model files first.
[[nodiscard]] absl::Status ValidateKvCacheSpec(const KvCacheSpec& spec);

// For each layer, the layer that owns the buffer it reads and writes; sharing
// chains are followed to their owner, so an owner maps to itself.
[[nodiscard]] std::vector<int32_t> KvBufferOwners(const KvCacheSpec& spec);

// Bytes of one block across all layers that own their KV:
// 2 (K and V) x owning layers x kv_heads x head_dim x block_size x dtype_bytes.
[[nodiscard]] int64_t KvBytesPerBlock(const KvCacheSpec& spec);

// Bytes of one owning layer's buffer (K and V) for num_blocks blocks.
[[nodiscard]] int64_t KvBufferBytes(const KvCacheSpec& spec, int32_t num_blocks);

// How many blocks fit in budget_bytes, the null block included (so one fewer
// is usable); 0 for a budget below one block. Capped at the int32 range.
[[nodiscard]] int32_t NumBlocksForBudget(const KvCacheSpec& spec, int64_t budget_bytes);

}  // namespace loom
