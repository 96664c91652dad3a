// The pool's free blocks in eviction order: the front is taken (and its cached
// prefix evicted) first. The links live in an array indexed by block id, so
// taking a block out of the middle, as a prefix hit on a free cached block
// does, costs O(1) and the queue never allocates after construction.
#ifndef LOOM_CACHE_FREE_BLOCK_QUEUE_H_
#define LOOM_CACHE_FREE_BLOCK_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/block_id.h"
#include "cache/huge_page_allocator.h"

namespace loom {

class FreeBlockQueue {
 public:
  // An empty queue able to hold block ids in [0, num_blocks).
  explicit FreeBlockQueue(int32_t num_blocks);

  FreeBlockQueue(const FreeBlockQueue&) = delete;
  FreeBlockQueue& operator=(const FreeBlockQueue&) = delete;

  // The block must not be queued already.
  void PushBack(BlockId id);
  void PushFront(BlockId id);
  // The queue must not be empty.
  [[nodiscard]] BlockId PopFront();
  // The block must be queued.
  void Remove(BlockId id);

  // The block taken next, and the one after a queued block; kNoBlock past
  // the back. They let the pool prefetch what its next allocations touch.
  [[nodiscard]] BlockId Front() const { return Next(sentinel_); }
  [[nodiscard]] BlockId Next(BlockId id) const {
    const BlockId next = links_[id].next;
    return next == sentinel_ ? kNoBlock : next;
  }
  static constexpr BlockId kNoBlock = -1;
  void PrefetchLink(BlockId id) const { __builtin_prefetch(&links_[static_cast<size_t>(id)]); }

  [[nodiscard]] bool Contains(BlockId id) const;
  [[nodiscard]] int32_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  // Front to back; O(size), for checks and tests.
  [[nodiscard]] std::vector<BlockId> ToVector() const;

  // Links are mutually consistent and the walk visits exactly size() blocks.
  void CheckInvariants() const;

 private:
  struct Link {
    BlockId prev = kUnlinked;
    BlockId next = kUnlinked;
  };
  static constexpr BlockId kUnlinked = -1;

  void InsertBetween(BlockId id, BlockId prev, BlockId next);

  // links_[sentinel_] closes the ring: its next is the front, its prev the back.
  BlockId sentinel_;
  std::vector<Link, HugePageAllocator<Link>> links_;
  int32_t size_ = 0;
};

}  // namespace loom

#endif  // LOOM_CACHE_FREE_BLOCK_QUEUE_H_
