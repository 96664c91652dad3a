// How a model's layers map onto the paged KV pool (types/kv_cache_layout.h):
// full-attention layers form one group and sliding-window layers another, as
// vLLM's hybrid allocator groups them; every pool block holds K/V for
// layers_per_page layers, the greatest common divisor of the groups' sizes,
// so that blocks are interchangeable between the groups. A model without
// sliding layers (or with only sliding ones) is one group of one page:
// layers_per_page is then every layer, and each layer owns a buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "types/kv_cache_layout.h"

namespace loom {

struct ModelKvLayout {
  KvCacheLayout cache;  // what the cache manager and the plans' tables follow
  // Buffers an executor allocates, each [num_blocks, kv_heads, block_size,
  // head_dim] for K and for V: layer i of a group reads and writes buffer
  // i % layers_per_page of the pool block at its group's page i / layers_per_page.
  int32_t layers_per_page = 0;
  std::vector<int32_t> entry;   // per layer: its table entry within a logical block
  std::vector<int32_t> buffer;  // per layer: its buffer
};

ModelKvLayout KvLayoutOf(const ModelConfig& config);

}  // namespace loom
