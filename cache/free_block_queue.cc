#include "cache/free_block_queue.h"

#include "base/check.h"

namespace loom {

FreeBlockQueue::FreeBlockQueue(int32_t num_blocks)
    : sentinel_(num_blocks), links_(static_cast<size_t>(num_blocks) + 1) {
  LOOM_CHECK(num_blocks >= 0);
  links_[sentinel_] = Link{.prev = sentinel_, .next = sentinel_};
}

void FreeBlockQueue::InsertBetween(BlockId id, BlockId prev, BlockId next) {
  LOOM_CHECK(id >= 0 && id < sentinel_);
  LOOM_CHECK(!Contains(id));
  links_[id] = Link{.prev = prev, .next = next};
  links_[prev].next = id;
  links_[next].prev = id;
  ++size_;
}

void FreeBlockQueue::PushBack(BlockId id) { InsertBetween(id, links_[sentinel_].prev, sentinel_); }

void FreeBlockQueue::PushFront(BlockId id) { InsertBetween(id, sentinel_, links_[sentinel_].next); }

BlockId FreeBlockQueue::PopFront() {
  LOOM_CHECK(!empty());
  const BlockId front = links_[sentinel_].next;
  Remove(front);
  return front;
}

void FreeBlockQueue::Remove(BlockId id) {
  LOOM_CHECK(Contains(id));
  Link& link = links_[id];
  links_[link.prev].next = link.next;
  links_[link.next].prev = link.prev;
  link = Link{};
  --size_;
}

bool FreeBlockQueue::Contains(BlockId id) const {
  return id >= 0 && id < sentinel_ && links_[id].next != kUnlinked;
}

std::vector<BlockId> FreeBlockQueue::ToVector() const {
  std::vector<BlockId> ids;
  ids.reserve(static_cast<size_t>(size_));
  for (BlockId id = links_[sentinel_].next; id != sentinel_; id = links_[id].next) {
    ids.push_back(id);
  }
  return ids;
}

void FreeBlockQueue::CheckInvariants() const {
  int32_t visited = 0;
  BlockId prev = sentinel_;
  for (BlockId id = links_[sentinel_].next; id != sentinel_; id = links_[id].next) {
    LOOM_CHECK(id >= 0 && id < sentinel_);
    LOOM_CHECK(links_[id].prev == prev);
    LOOM_CHECK(++visited <= size_);
    prev = id;
  }
  LOOM_CHECK(links_[sentinel_].prev == prev);
  LOOM_CHECK(visited == size_);
  int32_t linked = 0;
  for (BlockId id = 0; id < sentinel_; ++id) {
    if (Contains(id)) {
      ++linked;
    }
  }
  LOOM_CHECK(linked == size_);
}

}  // namespace loom
