// Built with -ffp-contract=off: d * q - m must stay a multiply and a subtract.
#include "kernels/cpu/dequant_blocks.h"

#include <cstdint>
#include <cstring>

#include "base/float16.h"
#include "kernels/cpu/matmul_quant_blocks.h"

namespace loom::kernels::cpu {
namespace {

template <typename Block>
Block Load(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

// The 16 6-bit scales of a Q3_K block, unpacked: low 4 bits from the nibbles
// of bytes 0..7, high 2 bits from the bit pairs of bytes 8..11.
void UnpackQ3Scales(const uint8_t* packed, int8_t* sc) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0x0f : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    sc[i] = static_cast<int8_t>(low | (high << 4));
  }
}

uint32_t HighBits5(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof(v));
  return v;
}

}  // namespace

void DecodeQ5_0(const std::byte* block, float* out) {
  const auto b = Load<BlockQ5_0>(block);
  const float d = HalfToFloat(b.d);
  const uint32_t qh = HighBits5(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int x0 = ((b.qs[j] & 0x0f) | (((qh >> j) << 4) & 0x10)) - 16;
    const int x1 = ((b.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
    out[j] = x0 * d;
    out[j + 16] = x1 * d;
  }
}

void DecodeQ5_1(const std::byte* block, float* out) {
  const auto b = Load<BlockQ5_1>(block);
  const float d = HalfToFloat(b.d);
  const float m = HalfToFloat(b.m);
  const uint32_t qh = HighBits5(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int x0 = (b.qs[j] & 0x0f) | (((qh >> j) << 4) & 0x10);
    const int x1 = (b.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
    out[j] = x0 * d + m;
    out[j + 16] = x1 * d + m;
  }
}

void DecodeQ2_K(const std::byte* block, float* out) {
  const auto b = Load<BlockQ2_K>(block);
  const float d = HalfToFloat(b.d);
  const float dmin = HalfToFloat(b.dmin);
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * (sc & 0x0f);
        const float ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<int8_t>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void DecodeQ3_K(const std::byte* block, float* out) {
  const auto b = Load<BlockQ3_K>(block);
  const float d = HalfToFloat(b.d);
  int8_t sc[16];
  UnpackQ3Scales(b.scales, sc);
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * (sc[is++] - 32);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          *out++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

void DecodeQ4_KSub(const std::byte* block, int s, float* out) {
  const auto b = Load<BlockQ4_K>(block);
  const float d = HalfToFloat(b.d);
  const float dmin = HalfToFloat(b.dmin);
  const uint8_t* q = b.qs + 32 * (s / 2);
  int sc, mn;
  ScaleMinK4(s, b.scales, sc, mn);
  const float d1 = d * sc, m1 = dmin * mn;
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) out[l] = d1 * ((q[l] >> shift) & 0x0f) - m1;
}

void DecodeQ5_KSub(const std::byte* block, int s, float* out) {
  const auto b = Load<BlockQ5_K>(block);
  const float d = HalfToFloat(b.d);
  const float dmin = HalfToFloat(b.dmin);
  const uint8_t* ql = b.qs + 32 * (s / 2);
  const uint8_t u = static_cast<uint8_t>(1 << s);
  int sc, mn;
  ScaleMinK4(s, b.scales, sc, mn);
  const float d1 = d * sc, m1 = dmin * mn;
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) {
    out[l] = d1 * (((ql[l] >> shift) & 0x0f) + (b.qh[l] & u ? 16 : 0)) - m1;
  }
}

void DecodeQ6_KSub(const std::byte* block, int s, float* out) {
  const auto b = Load<BlockQ6_K>(block);
  const float d = HalfToFloat(b.d);
  const int half = s / 4, quarter = s % 4;
  const uint8_t* ql = b.ql + 64 * half + 32 * (quarter % 2);
  const uint8_t* qh = b.qh + 32 * half;
  const int8_t* sc = b.scales + 8 * half + 2 * quarter;
  const int shift = 4 * (quarter / 2);
  for (int l = 0; l < 32; ++l) {
    const int q =
        static_cast<int8_t>(((ql[l] >> shift) & 0x0f) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    out[l] = d * sc[l / 16] * q;
  }
}

void DecodeQ4_K(const std::byte* block, float* out) {
  for (int s = 0; s < 8; ++s) DecodeQ4_KSub(block, s, out + 32 * s);
}

void DecodeQ5_K(const std::byte* block, float* out) {
  for (int s = 0; s < 8; ++s) DecodeQ5_KSub(block, s, out + 32 * s);
}

void DecodeQ6_K(const std::byte* block, float* out) {
  for (int s = 0; s < 8; ++s) DecodeQ6_KSub(block, s, out + 32 * s);
}

const WideFormat* WideFormatOf(QuantType type) {
  static constexpr WideFormat kQ5_0{kQuantBlock, sizeof(BlockQ5_0), DecodeQ5_0};
  static constexpr WideFormat kQ5_1{kQuantBlock, sizeof(BlockQ5_1), DecodeQ5_1};
  static constexpr WideFormat kQ2_K{kSuperBlock, sizeof(BlockQ2_K), DecodeQ2_K};
  static constexpr WideFormat kQ3_K{kSuperBlock, sizeof(BlockQ3_K), DecodeQ3_K};
  static constexpr WideFormat kQ4_K{kSuperBlock, sizeof(BlockQ4_K), DecodeQ4_K};
  static constexpr WideFormat kQ5_K{kSuperBlock, sizeof(BlockQ5_K), DecodeQ5_K};
  static constexpr WideFormat kQ6_K{kSuperBlock, sizeof(BlockQ6_K), DecodeQ6_K};
  switch (type) {
    case QuantType::kQ8_0:
    case QuantType::kQ4_0:
    case QuantType::kQ4_1:
      return nullptr;
    case QuantType::kQ5_0:
      return &kQ5_0;
    case QuantType::kQ5_1:
      return &kQ5_1;
    case QuantType::kQ2_K:
      return &kQ2_K;
    case QuantType::kQ3_K:
      return &kQ3_K;
    case QuantType::kQ4_K:
      return &kQ4_K;
    case QuantType::kQ5_K:
      return &kQ5_K;
    case QuantType::kQ6_K:
      break;
  }
  return &kQ6_K;
}

}  // namespace loom::kernels::cpu
