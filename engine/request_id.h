// The engine's id of a request, which Engine::Submit hands out. The
// scheduler's RequestHandle for the same request is a different number; the
// distinct type keeps the two apart.
#pragma once

#include <cstdint>
#include <utility>

namespace loom {

struct RequestId {
  uint64_t value = 0;

  friend bool operator==(RequestId a, RequestId b) = default;
  template <typename H>
  friend H AbslHashValue(H h, RequestId id) {
    return H::combine(std::move(h), id.value);
  }
};

}  // namespace loom
