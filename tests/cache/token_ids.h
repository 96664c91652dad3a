// Token-id helpers shared by the cache tests.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace loom {

// n consecutive token ids from first on: distinct prompts from distinct firsts.
inline std::vector<int32_t> Tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

}  // namespace loom
