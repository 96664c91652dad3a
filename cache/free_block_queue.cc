#include "cache/free_block_queue.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace loom {
namespace {

// At least twice num_blocks, so that a full ring is at least half removed
// entries and compaction costs O(1) per push; at most 2^31, so that no slot
// equals kNotQueued.
size_t Capacity(int32_t num_blocks) {
  LOOM_CHECK(num_blocks >= 0 && num_blocks <= (int32_t{1} << 30));
  return std::bit_ceil(std::max<size_t>(8, 2 * static_cast<size_t>(num_blocks)));
}

}  // namespace

FreeBlockQueue::FreeBlockQueue(int32_t num_blocks)
    : num_blocks_(num_blocks),
      ring_(Capacity(num_blocks), kNoBlock),
      mask_(static_cast<uint32_t>(ring_.size() - 1)),
      pos_(static_cast<size_t>(num_blocks), kNotQueued) {}

void FreeBlockQueue::PushBack(BlockId id) {
  LOOM_CHECK(id >= 0 && id < num_blocks_);
  LOOM_CHECK(!Contains(id));
  if (tail_ - head_ == ring_.size()) {
    Compact();
  }
  const uint32_t slot = tail_++ & mask_;
  ring_[slot] = id;
  pos_[static_cast<size_t>(id)] = slot;
  ++size_;
}

void FreeBlockQueue::PushFront(BlockId id) {
  LOOM_CHECK(id >= 0 && id < num_blocks_);
  LOOM_CHECK(!Contains(id));
  if (tail_ - head_ == ring_.size()) {
    Compact();
  }
  const uint32_t slot = --head_ & mask_;
  ring_[slot] = id;
  pos_[static_cast<size_t>(id)] = slot;
  ++size_;
}

void FreeBlockQueue::Remove(BlockId id) {
  LOOM_CHECK(Contains(id));
  // The entry stays in the ring and is skipped once it reaches the head.
  pos_[static_cast<size_t>(id)] = kNotQueued;
  if (--size_ == 0) {
    head_ = tail_;
  }
}

void FreeBlockQueue::Compact() {
  uint32_t write = head_;
  for (uint32_t read = head_; read != tail_; ++read) {
    const uint32_t slot = read & mask_;
    if (IsLive(slot)) {
      const BlockId id = ring_[slot];
      ring_[write & mask_] = id;
      pos_[static_cast<size_t>(id)] = write & mask_;
      ++write;
    }
  }
  tail_ = write;
}

std::vector<BlockId> FreeBlockQueue::ToVector() const {
  std::vector<BlockId> ids;
  ids.reserve(static_cast<size_t>(size_));
  for (uint32_t i = head_; i != tail_; ++i) {
    if (IsLive(i & mask_)) {
      ids.push_back(ring_[i & mask_]);
    }
  }
  return ids;
}

void FreeBlockQueue::CheckInvariants() const {
  LOOM_CHECK(tail_ - head_ <= ring_.size());
  int32_t live = 0;
  for (uint32_t i = head_; i != tail_; ++i) {
    const BlockId id = ring_[i & mask_];
    LOOM_CHECK(id >= 0 && id < num_blocks_);
    if (IsLive(i & mask_)) {
      ++live;
    }
  }
  LOOM_CHECK(live == size_);
  int32_t queued = 0;
  for (BlockId id = 0; id < num_blocks_; ++id) {
    const uint32_t slot = pos_[static_cast<size_t>(id)];
    if (slot == kNotQueued) {
      continue;
    }
    ++queued;
    LOOM_CHECK(ring_[slot] == id);
    // Inside the window [head_, tail_).
    LOOM_CHECK(((slot - head_) & mask_) < tail_ - head_);
  }
  LOOM_CHECK(queued == size_);
}

}  // namespace loom
