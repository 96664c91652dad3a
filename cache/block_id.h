// Block ids name the fixed-size blocks of the paged KV pool. Block 0 is the
// null block: it pads block tables and is never handed to a sequence.
#pragma once

#include <cstdint>

namespace loom {

using BlockId = int32_t;
inline constexpr BlockId kNullBlockId = 0;

}  // namespace loom
