#include "base/float16.h"

#include <bit>
#include <cmath>

namespace loom {

float BFloat16ToFloat(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

uint16_t FloatToBFloat16(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE half <-> float in software, rounding to nearest even: clang 14 has no
// _Float16 on x86 without AVX512-FP16. Bit-exact with _Float16 conversions.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  const float subnormal = static_cast<float>(mant) * 0x1p-24f;
  return sign != 0 ? -subnormal : subnormal;
}

uint16_t FloatToHalf(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal or zero
    return sign | static_cast<uint16_t>(std::nearbyint(std::bit_cast<float>(abs) * 0x1p24f));
  }
  uint32_t h = (abs >> 13) - (112u << 10);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace loom
