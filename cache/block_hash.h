// Prefix-cache keys. A full block is identified by a 128-bit hash chained over
// its parent block's hash, its token ids and the request's cache salt, so equal
// hashes mean equal whole prefixes, not just equal blocks.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace loom {

// A distinct type so that a hash can never be confused with a block id or a
// token count. The value-initialised hash is the parent of a sequence's first
// block.
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& hash) {
    return H::combine(std::move(h), hash.lo, hash.hi);
  }
};

// xxh3-128 over (parent, token_ids, cache_salt). Including the salt in every
// block (not only the first) keeps a block's hash self-describing.
[[nodiscard]] BlockHash HashBlockTokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                                        std::string_view cache_salt);

}  // namespace loom
