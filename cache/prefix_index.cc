#include "cache/prefix_index.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace loom {
namespace {

// A power of two at least twice num_blocks, so that probes stay short.
size_t Capacity(int32_t num_blocks) {
  return std::bit_ceil(std::max<size_t>(16, 2 * static_cast<size_t>(num_blocks)));
}

}  // namespace

PrefixIndex::PrefixIndex(int32_t num_blocks)
    : slots_(Capacity(num_blocks)), mask_(slots_.size() - 1) {
  LOOM_CHECK(num_blocks >= 0);
  // Home slots come from a 32-bit tag.
  LOOM_CHECK(slots_.size() <= (size_t{1} << 32));
}

void PrefixIndex::Erase(const BlockHash& hash, BlockId id) {
  size_t i = Tag(hash) & mask_;
  while (slots_[i].id != id) {
    LOOM_CHECK(slots_[i].id != kNoBlock);
    i = (i + 1) & mask_;
  }
  // Backward-shift deletion: pull later entries of the probe run into the
  // hole unless their home lies cyclically in (hole, their slot], which keeps
  // every entry reachable from its home without tombstones.
  for (size_t j = (i + 1) & mask_; slots_[j].id != kNoBlock; j = (j + 1) & mask_) {
    const size_t home = slots_[j].tag & mask_;
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = Slot{};
  --size_;
}

}  // namespace loom
