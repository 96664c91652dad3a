// KV-cache events: what the prefix cache reports as blocks enter and leave its
// index, for routers that send each request to the replica that already holds
// its prefix. The cache records them on the engine thread; a publisher
// (server/kv_event_publisher.h) puts them on the wire in vLLM's format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom {

// A full block's prefix-cache key: 128 bits chained over the parent block's
// key, the block's token ids and the request's cache salt, so equal keys mean
// equal whole prefixes (cache/block_hash.h computes it). A distinct type, so
// that a key can never be confused with a block id or a token count. The
// value-initialised key is the parent of a sequence's first block.
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& hash) {
    return H::combine(std::move(h), hash.lo, hash.hi);
  }
};

struct KvEvent {
  enum class Kind : uint8_t {
    // Blocks entered the prefix index: consecutive blocks of one sequence,
    // each the parent of the next.
    kBlockStored,
    // Blocks left the index (evicted to make room).
    kBlockRemoved,
    // The index was emptied.
    kAllBlocksCleared,
  };

  Kind kind = Kind::kBlockStored;
  std::vector<BlockHash> block_hashes;
  // kBlockStored only, from here on. The first block's parent; none when it
  // is a sequence's first block.
  std::optional<BlockHash> parent_block_hash;
  // The blocks' tokens, block_size per block, in order.
  std::vector<int32_t> token_ids;
  int32_t block_size = 0;
  // The requests' cache salt, part of every block's key; empty when none.
  std::string cache_salt;
};

}  // namespace loom
