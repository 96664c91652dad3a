// How a model's layers share the paged KV pool (vLLM's KV-cache groups, as
// its hybrid allocator forms them): layers that attend alike form a group,
// full-attention layers one, sliding-window layers another. Every pool block
// holds K/V of block_size positions for layers_per_page layers, so blocks are
// interchangeable between groups; a group of L layers takes L /
// layers_per_page blocks (its pages) per block_size positions.
//
// A sequence's block table holds, for each logical block b (positions
// [b * block_size, (b + 1) * block_size)), stride() pool blocks: the pages of
// group 0, then those of group 1, ...
//
//   logical block     0                    1
//   entries       |g0p0 g1p0 g1p1 ...|g0p0 g1p0 g1p1 ...| ...
//
// A sliding-window group needs only the positions in its window: its pages of
// logical blocks that every later query's window has left are released and
// read as the null block (0). A model without sliding layers has one group of
// one page (stride 1): the table is one block per logical block.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

struct KvCacheGroup {
  int32_t num_pages = 1;       // pool blocks per logical block
  int32_t sliding_window = 0;  // positions a query attends to (its own included); 0: all
};

struct KvCacheLayout {
  std::vector<KvCacheGroup> groups = {KvCacheGroup{}};

  // Table entries per logical block.
  [[nodiscard]] int32_t stride() const {
    int32_t n = 0;
    for (const KvCacheGroup& g : groups) n += g.num_pages;
    return n;
  }
  [[nodiscard]] bool has_sliding_window() const {
    for (const KvCacheGroup& g : groups) {
      if (g.sliding_window > 0) return true;
    }
    return false;
  }
};

}  // namespace loom
