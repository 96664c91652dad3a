// The prefix index: from a full block's hash to the block that holds that
// prefix. An open-addressing table of 8-byte slots (32 bits of the hash and the
// block id) with linear probing at load <= 1/2, so that a lookup, an insert or
// an eviction usually touches one cache line, which Prefetch can load ahead.
// The full hash lives with the block, so callers pass a way to read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/block_hash.h"
#include "cache/block_id.h"
#include "cache/huge_page_allocator.h"

namespace loom {

class PrefixIndex {
 public:
  static constexpr BlockId kNoBlock = -1;

  // Room for every block id below num_blocks at once.
  explicit PrefixIndex(int32_t num_blocks);

  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // The block entered under hash, or kNoBlock. hash_of(id) returns the full
  // hash of an entered block; it is called only on a 32-bit match.
  template <typename HashOf>
  [[nodiscard]] BlockId Find(const BlockHash& hash, const HashOf& hash_of) const {
    const uint32_t tag = Tag(hash);
    for (size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id == kNoBlock) {
        return kNoBlock;
      }
      if (slot.tag == tag && hash_of(slot.id) == hash) {
        return slot.id;
      }
    }
  }

  // Enters id under hash unless some block already is; returns whether it
  // was entered.
  template <typename HashOf>
  bool Insert(const BlockHash& hash, BlockId id, const HashOf& hash_of) {
    const uint32_t tag = Tag(hash);
    size_t i = tag & mask_;
    for (; slots_[i].id != kNoBlock; i = (i + 1) & mask_) {
      if (slots_[i].tag == tag && hash_of(slots_[i].id) == hash) {
        return false;
      }
    }
    slots_[i] = Slot{.tag = tag, .id = id};
    ++size_;
    return true;
  }

  // Removes id, which must be entered under hash. Compares ids only, so it
  // reads no block.
  void Erase(const BlockHash& hash, BlockId id);

  // Starts loading the cache line where a probe for hash begins.
  void Prefetch(const BlockHash& hash) const { __builtin_prefetch(&slots_[Tag(hash) & mask_]); }

  [[nodiscard]] int32_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

 private:
  struct Slot {
    uint32_t tag = 0;
    BlockId id = kNoBlock;
  };

  // The low bits pick the home slot; all 32 filter probes.
  static uint32_t Tag(const BlockHash& hash) { return static_cast<uint32_t>(hash.lo); }

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t mask_;
  int32_t size_ = 0;
};

}  // namespace loom
