// Half (IEEE fp16) and bfloat16 <-> float32 in software, for loaders,
// kernels and tests; conversions to the 16-bit types round to nearest even.
#pragma once

#include <cstdint>

namespace loom {

float BFloat16ToFloat(uint16_t v);
uint16_t FloatToBFloat16(float v);
// Exact, subnormals included.
float HalfToFloat(uint16_t v);
uint16_t FloatToHalf(float v);

}  // namespace loom
