// One model's vocabulary as the constraint module uses it: every token's
// bytes, the EOS ids and the byte trie, shared (immutable) by the compiler
// and every constraint it compiled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "constraint/token_trie.h"

namespace loom::constraint {

struct VocabularyIndex {
  VocabularyIndex(std::vector<std::string> bytes, std::vector<int32_t> eos, int32_t size)
      : token_bytes(std::move(bytes)),
        eos_token_ids(std::move(eos)),
        vocab_size(size),
        trie(token_bytes) {}

  const std::vector<std::string> token_bytes;
  const std::vector<int32_t> eos_token_ids;
  const int32_t vocab_size;
  const TokenTrie trie;

  bool IsEos(int32_t token) const {
    for (int32_t e : eos_token_ids) {
      if (e == token) return true;
    }
    return false;
  }
};

}  // namespace loom::constraint
