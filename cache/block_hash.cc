#include "cache/block_hash.h"

#include <xxhash.h>

#include <array>
#include <cstring>
#include <vector>

namespace loom {

BlockHash HashBlockTokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                          std::string_view cache_salt) {
  // One contiguous buffer so that a single one-shot xxh3 call covers it. A
  // stack buffer that is not zero-filled covers blocks of up to 64 tokens
  // without a salt; longer inputs take the heap. The layout is unambiguous:
  // the parent and the token span have a fixed length for a given block size,
  // and the salt comes last.
  const size_t size = sizeof(parent) + token_ids.size_bytes() + cache_salt.size();
  std::array<unsigned char, 320> stack_buffer;
  std::vector<unsigned char> heap_buffer;
  unsigned char* buffer = stack_buffer.data();
  if (size > stack_buffer.size()) {
    heap_buffer.resize(size);
    buffer = heap_buffer.data();
  }
  unsigned char* out = buffer;
  std::memcpy(out, &parent.lo, sizeof(parent.lo));
  out += sizeof(parent.lo);
  std::memcpy(out, &parent.hi, sizeof(parent.hi));
  out += sizeof(parent.hi);
  if (!token_ids.empty()) {
    std::memcpy(out, token_ids.data(), token_ids.size_bytes());
    out += token_ids.size_bytes();
  }
  if (!cache_salt.empty()) {
    std::memcpy(out, cache_salt.data(), cache_salt.size());
  }
  const XXH128_hash_t digest = XXH3_128bits(buffer, size);
  return BlockHash{.lo = digest.low64, .hi = digest.high64};
}

}  // namespace loom
