// Synthetic ggml blocks for tests: random quants and packed scales, with each
// fp16 scale (and min or offset) drawn in a sane range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul_quant.h"

namespace loom::kernels {

// Offsets of a block's fp16 fields: its scale first, then its min or offset.
inline std::vector<int> HalfFieldOffsets(cpu::QuantType type) {
  switch (type) {
    case cpu::QuantType::kQ4_1:
    case cpu::QuantType::kQ5_1:
    case cpu::QuantType::kQ4_K:
    case cpu::QuantType::kQ5_K:
      return {0, 2};
    case cpu::QuantType::kQ2_K:
      return {80, 82};
    case cpu::QuantType::kQ3_K:
      return {108};
    case cpu::QuantType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// `blocks` blocks of random bytes whose fp16 fields hold magnitudes in
// [2^min_exp, 2^(max_exp + 1)) of either sign, and now and then a subnormal.
inline std::vector<std::byte> RandomBlocks(cpu::QuantType type, int64_t blocks, uint32_t seed,
                                           int min_exp = -8, int max_exp = -5) {
  std::mt19937 rng(seed);
  const int64_t bytes = cpu::QuantBlockBytes(type);
  std::vector<std::byte> out(blocks * bytes);
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  const auto exp_span = static_cast<uint32_t>(max_exp - min_exp + 1);
  for (int64_t i = 0; i < blocks; ++i) {
    for (int off : HalfFieldOffsets(type)) {
      const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
      const auto exponent = static_cast<uint16_t>(15 + min_exp + rng() % exp_span);
      const uint16_t h = rng() % 16 == 0
                             ? static_cast<uint16_t>(sign | (1 + rng() % 0x3ff))
                             : static_cast<uint16_t>(sign | (exponent << 10) | (rng() % 0x400));
      std::memcpy(out.data() + i * bytes + off, &h, 2);
    }
  }
  return out;
}

// RandomBlocks whose bytes, all but the fp16 fields, hold the largest
// integers of the type: all ones (the largest 4- and 5-bit values, K-quant
// scales of 63), Q8_0's -128, Q6_K's q = 0 (-32) with scales of -128. Times x
// at its largest, the integer paths' sums at their limits.
inline std::vector<std::byte> LargestBlocks(cpu::QuantType type, int64_t blocks, uint32_t seed) {
  std::vector<std::byte> w = RandomBlocks(type, blocks, seed);
  const int64_t bytes = cpu::QuantBlockBytes(type);
  const std::vector<int> halves = HalfFieldOffsets(type);
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* block = w.data() + b * bytes;
    for (int64_t i = 0; i < bytes; ++i) {
      bool half = false;
      for (int off : halves) half = half || i == off || i == off + 1;
      if (half) continue;
      std::byte fill = std::byte{0xff};
      if (type == cpu::QuantType::kQ8_0) fill = std::byte{0x80};
      if (type == cpu::QuantType::kQ6_K) fill = i >= 192 ? std::byte{0x80} : std::byte{0x00};
      block[i] = fill;
    }
  }
  return w;
}

}  // namespace loom::kernels
