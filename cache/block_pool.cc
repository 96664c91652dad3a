#include "cache/block_pool.h"

#include <algorithm>

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

// Inlined by force: GCC counts a prefetch as no side effect, so it may deem a
// function that only prefetches pure and drop every call to it.
__attribute__((always_inline)) inline void BlockPool::PrefetchRecordAt(uint32_t k) const {
  const BlockId id = free_queue_.AtOffset(k);
  if (id != FreeBlockQueue::kNoBlock) {
    // A record may straddle two cache lines; the hash can lie in either.
    const Block* block = &blocks_[static_cast<size_t>(id)];
    __builtin_prefetch(block, 1);
    __builtin_prefetch(reinterpret_cast<const char*>(block + 1) - 1, 1);
    free_queue_.PrefetchPosition(id);
  }
}

__attribute__((always_inline)) inline void BlockPool::PrefetchIndexSlotAt(uint32_t k) const {
  const BlockId id = free_queue_.AtOffset(k);
  if (id == FreeBlockQueue::kNoBlock) {
    return;
  }
  const Block& block = blocks_[static_cast<size_t>(id)];
  if (block.cached) {
    index_.Prefetch(block.hash);
  }
}

void BlockPool::Allocate(int32_t n, std::vector<BlockId>* out) {
  LOOM_CHECK(n >= 0 && n <= NumFreeBlocks());
  if (n == 0) {
    return;
  }
  const auto count = static_cast<uint32_t>(n);
  // Taking each block starts the loads for the one a fixed distance behind
  // it, past this call too: most calls are decodes taking one block each, a
  // few hundred nanoseconds apart. A call taking several blocks first loads
  // the ones it reaches before that distance, records before index slots.
  if (count > 1) {
    for (uint32_t k = 1; k < std::min(count, kRecordAhead); ++k) {
      PrefetchRecordAt(k);
    }
    for (uint32_t k = 1; k < std::min(count, kIndexAhead); ++k) {
      PrefetchIndexSlotAt(k);
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    PrefetchRecordAt(kRecordAhead);
    PrefetchIndexSlotAt(kIndexAhead);
    const BlockId id = free_queue_.PopFront();
    TakeFree(id);
    out->push_back(id);
  }
  num_used_ += n;
}

void BlockPool::TakeFree(BlockId id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  if (block.cached) {
    index_.Erase(block.hash, id);
    if (eviction_log_ != nullptr && block.reported) {
      eviction_log_->push_back(block.hash);
    }
    block.cached = false;
    block.hash = BlockHash{};
    --num_cached_free_;
  }
  block.ref_cnt = 1;
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
  // Freeing writes the block's queue position: load it alongside the record.
  free_queue_.PrefetchPosition(id);
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

bool BlockPool::CacheFullBlock(BlockId id, const BlockHash& hash, bool reported) {
  Block& block = blocks_[Checked(id)];
  LOOM_CHECK(block.ref_cnt > 0);
  if (!enable_caching_) {
    return false;
  }
  if (block.cached) {
    LOOM_CHECK(block.hash == hash);
    return false;
  }
  if (!index_.Insert(hash, id, HashOf())) {
    return false;
  }
  block.cached = true;
  block.reported = reported;
  block.hash = hash;
  return true;
}

std::vector<BlockHash> BlockPool::CachedHashes() const {
  std::vector<BlockHash> hashes;
  hashes.reserve(static_cast<size_t>(index_.size()));
  for (const Block& block : blocks_) {
    if (block.cached && block.reported) {
      hashes.push_back(block.hash);
    }
  }
  return hashes;
}

std::optional<BlockHash> BlockPool::cached_hash(BlockId id) const {
  const Block& block = blocks_[Checked(id)];
  if (!block.cached) {
    return std::nullopt;
  }
  return block.hash;
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
