// Prefix-cache keys. A full block is identified by a 128-bit hash chained over
// its parent block's hash, its token ids and the request's cache salt, so equal
// hashes mean equal whole prefixes, not just equal blocks.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "types/kv_event.h"

namespace loom {

// xxh3-128 over (parent, token_ids, cache_salt). Including the salt in every
// block (not only the first) keeps a block's hash self-describing.
[[nodiscard]] BlockHash HashBlockTokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                                        std::string_view cache_salt);

}  // namespace loom
