// ggml's block layouts for the quantized weight types the CPU matmul reads
// (Q8_0, Q4_0, Q4_1): 32 values of a row per block, an fp16 scale (and, for
// Q4_1, an fp16 offset) in front. The GGUF loader reads the same structs.
#pragma once

#include <cstdint>

namespace loom::kernels {

inline constexpr int kQuantBlock = 32;  // values per block for Q8_0, Q4_0, Q4_1

// Scales are IEEE fp16 bit patterns.
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

}  // namespace loom::kernels
