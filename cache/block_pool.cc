#include "cache/block_pool.h"

#include <span>

#include "base/check.h"

namespace loom {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : enable_caching_(enable_caching),
      blocks_(static_cast<size_t>(num_blocks)),
      free_queue_(num_blocks),
      index_(enable_caching ? num_blocks : 0) {
  LOOM_CHECK(num_blocks >= 1);
  for (BlockId id = 1; id < num_blocks; ++id) {
    free_queue_.PushBack(id);
  }
}

size_t BlockPool::Checked(BlockId id) const {
  LOOM_CHECK(id > kNullBlockId && id < num_blocks());
  return static_cast<size_t>(id);
}

void BlockPool::Allocate(int32_t n, std::vector<BlockId>* out) {
  LOOM_CHECK(n >= 0 && n <= NumFreeBlocks());
  if (n == 0) {
    return;
  }
  // Three passes so that the cache misses of the n blocks overlap: take the
  // ids, then load their Blocks, then their prefix index entries, and only
  // then evict.
  const size_t first = out->size();
  for (int32_t i = 0; i < n; ++i) {
    const BlockId id = free_queue_.PopFront();
    __builtin_prefetch(&blocks_[Checked(id)], 1);
    out->push_back(id);
  }
  const std::span<const BlockId> taken(out->data() + first, static_cast<size_t>(n));
  if (n > 1) {
    for (BlockId id : taken) {
      const Block& block = blocks_[static_cast<size_t>(id)];
      if (block.cached) {
        index_.Prefetch(block.hash);
      }
    }
  }
  for (BlockId id : taken) {
    Block& block = blocks_[static_cast<size_t>(id)];
    if (block.cached) {
      index_.Erase(block.hash, id);
      block.cached = false;
      block.hash = BlockHash{};
      --num_cached_free_;
    }
    block.ref_cnt = 1;
  }
  num_used_ += n;
  PrefetchFront();
}

void BlockPool::PrefetchFront() const {
  const BlockId front = free_queue_.Front();
  if (front == FreeBlockQueue::kNoBlock) {
    return;
  }
  const Block& block = blocks_[static_cast<size_t>(front)];
  if (block.cached) {
    index_.Prefetch(block.hash);
  }
  const BlockId next = free_queue_.Next(front);
  if (next != FreeBlockQueue::kNoBlock) {
    __builtin_prefetch(&blocks_[static_cast<size_t>(next)]);
    free_queue_.PrefetchLink(next);
  }
}

std::optional<BlockId> BlockPool::Lookup(const BlockHash& hash) const {
  const BlockId id = index_.Find(hash, HashOf());
  if (id == PrefixIndex::kNoBlock) {
    return std::nullopt;
  }
  return id;
}

void BlockPool::Touch(BlockId id) {
  Block& block = blocks_[Checked(id)];
  if (block.ref_cnt == 0) {
    free_queue_.Remove(id);
    ++num_used_;
    if (block.cached) {
      --num_cached_free_;
    }
  }
  ++block.ref_cnt;
}

void BlockPool::Release(BlockId id) {
  Block& block = blocks_[Checked(id)];
  LOOM_CHECK(block.ref_cnt > 0);
  if (--block.ref_cnt > 0) {
    return;
  }
  --num_used_;
  if (block.cached) {
    free_queue_.PushBack(id);
    ++num_cached_free_;
  } else {
    free_queue_.PushFront(id);
  }
}

void BlockPool::CacheFullBlock(BlockId id, const BlockHash& hash) {
  Block& block = blocks_[Checked(id)];
  LOOM_CHECK(block.ref_cnt > 0);
  if (!enable_caching_) {
    return;
  }
  if (block.cached) {
    LOOM_CHECK(block.hash == hash);
    return;
  }
  if (!index_.Insert(hash, id, HashOf())) {
    return;
  }
  block.cached = true;
  block.hash = hash;
}

std::optional<BlockHash> BlockPool::cached_hash(BlockId id) const {
  const Block& block = blocks_[Checked(id)];
  if (!block.cached) {
    return std::nullopt;
  }
  return block.hash;
}

void BlockPool::ResetPrefixCache() {
  index_.Clear();
  for (Block& block : blocks_) {
    block.cached = false;
    block.hash = BlockHash{};
  }
  num_cached_free_ = 0;
}

void BlockPool::CheckInvariants() const {
  free_queue_.CheckInvariants();
  const Block& null_block = blocks_[kNullBlockId];
  LOOM_CHECK(null_block.ref_cnt == 0 && !null_block.cached);
  LOOM_CHECK(!free_queue_.Contains(kNullBlockId));
  int32_t used = 0;
  int32_t cached = 0;
  int32_t cached_free = 0;
  for (BlockId id = 1; id < num_blocks(); ++id) {
    const Block& block = blocks_[static_cast<size_t>(id)];
    LOOM_CHECK(block.ref_cnt >= 0);
    LOOM_CHECK((block.ref_cnt == 0) == free_queue_.Contains(id));
    if (block.ref_cnt > 0) {
      ++used;
    }
    if (!block.cached) {
      continue;
    }
    ++cached;
    if (block.ref_cnt == 0) {
      ++cached_free;
    }
    LOOM_CHECK(index_.Find(block.hash, HashOf()) == id);
  }
  LOOM_CHECK(used == num_used_);
  LOOM_CHECK(used + NumFreeBlocks() == num_blocks() - 1);
  LOOM_CHECK(cached_free == num_cached_free_);
  LOOM_CHECK(index_.size() == cached);
  LOOM_CHECK(enable_caching_ || index_.empty());
}

}  // namespace loom
