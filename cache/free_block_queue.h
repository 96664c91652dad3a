// The pool's free blocks in eviction order: the front is taken (and its cached
// prefix evicted) first. A ring buffer of block ids with lazy deletion, so the
// ids about to be taken lie contiguously and the pool can prefetch what they
// touch many blocks ahead; taking a block out of the middle, as a prefix hit on
// a free cached block does, costs O(1) and the queue never allocates after
// construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/check.h"
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
  // The queue must not be empty. Inline: the pool calls it once per block
  // allocated.
  [[nodiscard]] BlockId PopFront() {
    LOOM_CHECK(!empty());
    // A queued entry lies ahead, so the skip stops inside the window.
    while (!IsLive(head_ & mask_)) {
      ++head_;
    }
    const BlockId front = ring_[head_++ & mask_];
    pos_[static_cast<size_t>(front)] = kNotQueued;
    if (--size_ == 0) {
      head_ = tail_;
    }
    return front;
  }
  // The block must be queued.
  void Remove(BlockId id);

  // The ring entry k places behind the head, or kNoBlock past the back: a
  // block id below num_blocks, but possibly one removed since it was queued.
  // Only a hint for prefetching what the next PopFront calls touch.
  [[nodiscard]] BlockId AtOffset(uint32_t k) const {
    return k < tail_ - head_ ? ring_[(head_ + k) & mask_] : kNoBlock;
  }
  static constexpr BlockId kNoBlock = -1;
  // Starts loading the position entry PopFront reads to take id.
  void PrefetchPosition(BlockId id) const { __builtin_prefetch(&pos_[static_cast<size_t>(id)]); }

  [[nodiscard]] bool Contains(BlockId id) const {
    return id >= 0 && id < num_blocks_ && pos_[static_cast<size_t>(id)] != kNotQueued;
  }
  [[nodiscard]] int32_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  // Front to back; O(size + removed entries), for checks and tests.
  [[nodiscard]] std::vector<BlockId> ToVector() const;

  // Every queued block's position holds it, inside the live window, and the
  // window holds exactly size() such entries.
  void CheckInvariants() const;

 private:
  static constexpr uint32_t kNotQueued = UINT32_MAX;

  // Whether the entry at ring slot `slot` is still queued there.
  [[nodiscard]] bool IsLive(uint32_t slot) const {
    return pos_[static_cast<size_t>(ring_[slot])] == slot;
  }
  // Moves the queued entries, in order, to the start of the window and drops
  // the removed ones. Called when a push finds the ring full; since at most
  // half the ring is queued, it frees at least half the ring.
  void Compact();

  const int32_t num_blocks_;
  // Entries lie in ring counters [head_, tail_), at slot counter & mask_. The
  // counters wrap around 2^32, which a power-of-two ring follows exactly.
  std::vector<BlockId, HugePageAllocator<BlockId>> ring_;
  const uint32_t mask_;
  // Per block: the ring slot of its entry, or kNotQueued. An entry whose
  // block's position names another slot (or none) was removed and is skipped.
  std::vector<uint32_t, HugePageAllocator<uint32_t>> pos_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
  int32_t size_ = 0;
};

}  // namespace loom
