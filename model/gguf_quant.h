// ggml's block layouts for the quantized types Loom reads (Q8_0, Q4_0, Q4_1),
// and row dequantization. Exposed so that CPU kernels can work on the blocks
// directly instead of a dequantized copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom {

inline constexpr int kQuantBlock = 32;  // values per block for Q8_0, Q4_0, Q4_1

// Scales are IEEE fp16 bit patterns (HalfToFloat in model/weights.h).
struct BlockQ8_0 {
  uint16_t d;  // scale: x = d * q
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;      // x = d * (q - 8)
  uint8_t qs[16];  // value j in the low nibble of qs[j], value j + 16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  uint16_t d;  // x = d * q + m
  uint16_t m;
  uint8_t qs[16];  // nibble layout as BlockQ4_0
};
static_assert(sizeof(BlockQ4_1) == 20);

// Dequantize `n` values (a multiple of 32) from raw block bytes.
void DequantizeQ8_0(std::span<const std::byte> blocks, std::span<float> out);
void DequantizeQ4_0(std::span<const std::byte> blocks, std::span<float> out);
void DequantizeQ4_1(std::span<const std::byte> blocks, std::span<float> out);

// Quantize `in` (a multiple of 32 values) as ggml does; for tests and fixtures.
void QuantizeQ8_0(std::span<const float> in, std::span<std::byte> blocks);
void QuantizeQ4_0(std::span<const float> in, std::span<std::byte> blocks);
void QuantizeQ4_1(std::span<const float> in, std::span<std::byte> blocks);

}  // namespace loom
