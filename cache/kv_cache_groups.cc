#include "cache/kv_cache_groups.h"

#include <algorithm>

#include "base/check.h"

namespace loom {
namespace {

// SplitMix64: well-spread 64-bit values from a counter.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

KvCacheGroups::KvCacheGroups(const KvCacheLayout& layout, int32_t block_size)
    : groups_(layout.groups), block_size_(block_size) {
  LOOM_CHECK(!groups_.empty() && block_size_ > 0);
  for (int32_t g = 0; g < num_groups(); ++g) {
    const KvCacheGroup& group = groups_[g];
    LOOM_CHECK(group.num_pages > 0 && group.sliding_window >= 0);
    if (group.sliding_window > 0) {
      LOOM_CHECK(window_ == 0 || window_ == group.sliding_window) << "one sliding window";
      window_ = group.sliding_window;
      sliding_pages_ += group.num_pages;
    } else {
      full_pages_ += group.num_pages;
    }
    for (int32_t p = 0; p < group.num_pages; ++p) {
      entry_group_.push_back(g);
      entry_sliding_.push_back(group.sliding_window > 0);
    }
  }
  stride_ = static_cast<int32_t>(entry_group_.size());
  // Entry 0 keeps the chained hash; the others XOR a fixed 128-bit mask into
  // it, a bijection, so their keys collide with other keys no more often
  // than two chained hashes do.
  page_mix_.resize(static_cast<size_t>(stride_));
  for (int32_t k = 1; k < stride_; ++k) {
    page_mix_[k] =
        BlockHash{Mix(2 * static_cast<uint64_t>(k)), Mix(2 * static_cast<uint64_t>(k) + 1)};
  }
}

int64_t KvCacheGroups::FirstNeededBlock(int64_t position) const {
  if (window_ == 0 || position < window_) return 0;
  return (position - window_ + 1) / block_size_;
}

BlockHash KvCacheGroups::PageHash(const BlockHash& chain, int32_t entry) const {
  const BlockHash& mix = page_mix_[static_cast<size_t>(entry)];
  return BlockHash{chain.lo ^ mix.lo, chain.hi ^ mix.hi};
}

int64_t KvCacheGroups::LongestHit(const std::vector<std::vector<bool>>& cached) const {
  LOOM_CHECK(cached.size() == groups_.size());
  const size_t n = cached[0].size();
  // run[g][b]: cached blocks of group g ending at b.
  std::vector<std::vector<int64_t>> run(groups_.size(), std::vector<int64_t>(n, 0));
  for (size_t g = 0; g < groups_.size(); ++g) {
    LOOM_CHECK(cached[g].size() == n);
    for (size_t b = 0; b < n; ++b) {
      run[g][b] = cached[g][b] ? (b > 0 ? run[g][b - 1] : 0) + 1 : 0;
    }
  }
  for (int64_t h = static_cast<int64_t>(n); h > 0; --h) {
    bool ok = true;
    for (size_t g = 0; g < groups_.size() && ok; ++g) {
      const int64_t first = groups_[g].sliding_window > 0 ? FirstNeededBlock(h * block_size_) : 0;
      ok = run[g][static_cast<size_t>(h - 1)] >= h - first;
    }
    if (ok) return h;
  }
  return 0;
}

int64_t KvCacheGroups::MaxBlocksHeld(int64_t num_tokens, int64_t max_chunk_tokens) const {
  const int64_t blocks = (num_tokens + block_size_ - 1) / block_size_;
  int64_t sliding_blocks = blocks;
  if (window_ > 0) {
    // A call that starts at position c keeps the blocks from FirstNeededBlock(c)
    // and adds those its chunk reaches: the window's blocks, one more for a
    // window that starts mid-block, and the chunk's.
    const int64_t window_blocks = (window_ - 1 + block_size_ - 1) / block_size_ + 1;
    const int64_t chunk_blocks =
        (std::max<int64_t>(max_chunk_tokens, 1) + block_size_ - 1) / block_size_ + 1;
    sliding_blocks = std::min(blocks, window_blocks + chunk_blocks);
  }
  return full_pages_ * blocks + sliding_pages_ * sliding_blocks;
}

}  // namespace loom
