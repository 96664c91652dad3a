// ggml's block layouts for the quantized weight types the CPU matmul reads:
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 hold 32 values of a row per block with an fp16
// scale (and, for Q4_1 and Q5_1, an fp16 offset) in front; the K-quants Q2_K
// to Q6_K hold 256 values per super-block, split in sub-blocks of 16 or 32
// with packed integer scales (and mins) under one or two fp16 scales. The GGUF
// loader reads the same structs.
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

struct BlockQ5_0 {
  uint16_t d;      // x = d * (q - 16)
  uint8_t qh[4];   // bit j of the little-endian word: the 5th bit of value j
  uint8_t qs[16];  // low 4 bits, nibble layout as BlockQ4_0
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;  // x = d * q + m
  uint16_t m;
  uint8_t qh[4];  // as BlockQ5_0
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

inline constexpr int kSuperBlock = 256;  // values per K-quant super-block
inline constexpr int kKScaleBytes = 12;  // 8 6-bit scales and 8 6-bit mins

// 16 sub-blocks of 16: x = d * sc * q - dmin * mn, q 2-bit, sc and mn 4-bit.
struct BlockQ2_K {
  uint8_t scales[16];  // sc in the low nibble, mn in the high one
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * (sc - 32) * (q - (high bit ? 0 : 4)), q 2-bit
// plus the high bit in hmask, sc 6-bit.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32: x = d * sc * q - dmin * mn, q 4-bit, sc and mn 6-bit.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As BlockQ4_K with a 5th bit per value in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * sc * (q - 32), q 6-bit (4 in ql, 2 in qh).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

}  // namespace loom::kernels
