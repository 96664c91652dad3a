// The rules of a KV-cache layout's groups (types/kv_cache_layout.h) that the
// cache manager applies per table entry: which group an entry belongs to,
// which logical blocks a query still reads through it, the prefix-cache key
// of each page, how long a cached prefix each group can resume from, and how
// many pool blocks a sequence can hold at once. Pure arithmetic on the layout.
#pragma once

#include <cstdint>
#include <vector>

#include "types/kv_cache_layout.h"
#include "types/kv_event.h"

namespace loom {

class KvCacheGroups {
 public:
  // At most one sliding window across the groups.
  KvCacheGroups(const KvCacheLayout& layout, int32_t block_size);

  [[nodiscard]] int32_t stride() const { return stride_; }
  [[nodiscard]] int32_t num_groups() const { return static_cast<int32_t>(groups_.size()); }
  [[nodiscard]] int32_t sliding_window() const { return window_; }
  [[nodiscard]] int32_t sliding_pages() const { return sliding_pages_; }
  [[nodiscard]] bool has_sliding_window() const { return window_ > 0; }
  [[nodiscard]] int32_t group_of(int32_t entry) const { return entry_group_[entry]; }
  [[nodiscard]] bool is_sliding(int32_t entry) const { return entry_sliding_[entry]; }
  [[nodiscard]] bool group_is_sliding(int32_t group) const {
    return groups_[group].sliding_window > 0;
  }

  // Logical blocks before this one hold only positions that no query at
  // `position` or later reads through a sliding entry (their pages may be
  // released); 0 without a window.
  [[nodiscard]] int64_t FirstNeededBlock(int64_t position) const;

  // The prefix-cache key of entry `entry` of a logical block whose chained
  // hash is `chain`: the chain itself for entry 0, so that a one-page layout
  // keys its blocks as before, else a key derived from it.
  [[nodiscard]] BlockHash PageHash(const BlockHash& chain, int32_t entry) const;

  // The longest cached prefix, in logical blocks, that every group can resume
  // from: full groups need each of its blocks, sliding groups only the blocks
  // the next query reads. cached[g][b] tells whether every page of group g of
  // logical block b is cached; candidates are at most cached[g].size() blocks.
  [[nodiscard]] int64_t LongestHit(const std::vector<std::vector<bool>>& cached) const;

  // The most pool blocks a sequence of num_tokens tokens holds at once when
  // each cache call adds at most max_chunk_tokens tokens.
  [[nodiscard]] int64_t MaxBlocksHeld(int64_t num_tokens, int64_t max_chunk_tokens) const;

 private:
  std::vector<KvCacheGroup> groups_;
  int32_t block_size_;
  int32_t stride_ = 0;
  int32_t window_ = 0;
  int32_t full_pages_ = 0;
  int32_t sliding_pages_ = 0;
  std::vector<int32_t> entry_group_;
  std::vector<bool> entry_sliding_;
  std::vector<BlockHash> page_mix_;  // per entry
};

}  // namespace loom
