// Scalar decoders of ggml's Q5_0, Q5_1 and K-quant blocks to float32, value by
// value with the float operations (and their order) of ggml's reference
// dequantizer, so that a GGUF tensor decodes to the floats llama.cpp gives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/matmul_quant.h"

namespace loom::kernels::cpu {

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block from
// its 12 packed bytes q: for j < 4 the low 6 bits of bytes j and j + 4;
// above, a nibble of byte j + 4 with the top 2 bits of bytes j - 4 and j.
inline void ScaleMinK4(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Each decodes one block: 32 values (Q5_0, Q5_1) or 256 (the K-quants).
void DecodeQ5_0(const std::byte* block, float* out);
void DecodeQ5_1(const std::byte* block, float* out);
void DecodeQ2_K(const std::byte* block, float* out);
void DecodeQ3_K(const std::byte* block, float* out);
void DecodeQ4_K(const std::byte* block, float* out);
void DecodeQ5_K(const std::byte* block, float* out);
void DecodeQ6_K(const std::byte* block, float* out);

// Values [32 s, 32 s + 32) of a Q4_K, Q5_K or Q6_K block (s in [0, 8)), with
// the operations of the whole-block decoders (which are built on them): the
// quantized matmul decodes W one such step at a time.
void DecodeQ4_KSub(const std::byte* block, int s, float* out);
void DecodeQ5_KSub(const std::byte* block, int s, float* out);
void DecodeQ6_KSub(const std::byte* block, int s, float* out);

// A block type without register decoders: its size and its decoder.
struct WideFormat {
  int values;  // per block
  int64_t bytes;
  void (*decode)(const std::byte* block, float* out);
};
// Null for Q8_0, Q4_0, Q4_1 (matmul_quant.cc decodes those).
const WideFormat* WideFormatOf(QuantType type);

}  // namespace loom::kernels::cpu
