// Q5_0, Q5_1 and the K-quants: the decoders against a reference written value
// by value from ggml's format description, and the quantized matmul against
// float32 Matmul on the dequantized weights, bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/float16.h"
#include "gtest/gtest.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/matmul.h"
#include "tests/kernels/random_blocks.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

constexpr QuantType kTypes[] = {QuantType::kQ5_0, QuantType::kQ5_1, QuantType::kQ2_K,
                                QuantType::kQ3_K, QuantType::kQ4_K, QuantType::kQ5_K,
                                QuantType::kQ6_K};

float Half(const uint8_t* b, int off) {
  uint16_t h;
  std::memcpy(&h, b + off, 2);
  return HalfToFloat(h);
}

int Bit(const uint8_t* bits, int i) { return (bits[i / 8] >> (i % 8)) & 1; }

// The 6-bit scale and min of sub-block s of Q4_K / Q5_K (12 scale bytes at 4).
void ScaleMin(const uint8_t* s12, int s, int& sc, int& mn) {
  if (s < 4) {
    sc = s12[s] % 64;
    mn = s12[s + 4] % 64;
  } else {
    sc = s12[s + 4] % 16 + (s12[s - 4] / 64) * 16;
    mn = s12[s + 4] / 16 + (s12[s] / 64) * 16;
  }
}

// Value i of one block, from the format description.
float RefValue(QuantType type, const uint8_t* b, int i) {
  const int half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
  switch (type) {
    case QuantType::kQ5_0:
    case QuantType::kQ5_1: {
      const uint8_t* qs = b + (type == QuantType::kQ5_0 ? 6 : 8);
      const uint8_t* qh = qs - 4;
      const int q = (i < 16 ? qs[i] % 16 : qs[i - 16] / 16) + 16 * Bit(qh, i);
      if (type == QuantType::kQ5_0) return static_cast<float>(q - 16) * Half(b, 0);
      return static_cast<float>(q) * Half(b, 0) + Half(b, 2);
    }
    case QuantType::kQ2_K: {
      const int sc = b[i / 16];
      const int q = (b[16 + 32 * half + l] >> (2 * quarter)) & 3;
      return Half(b, 80) * static_cast<float>(sc % 16) * static_cast<float>(q) -
             Half(b, 82) * static_cast<float>(sc / 16);
    }
    case QuantType::kQ3_K: {
      const uint8_t* s12 = b + 96;
      const int s = i / 16;
      const int low = s < 8 ? s12[s] % 16 : s12[s - 8] / 16;
      const int sc = low + 16 * ((s12[8 + s % 4] >> (2 * (s / 4))) & 3);
      const int q = ((b[32 + 32 * half + l] >> (2 * quarter)) & 3) -
                    (Bit(b, 8 * l + 4 * half + quarter) ? 0 : 4);
      return Half(b, 108) * static_cast<float>(sc - 32) * static_cast<float>(q);
    }
    case QuantType::kQ4_K:
    case QuantType::kQ5_K: {
      int sc, mn;
      ScaleMin(b + 4, i / 32, sc, mn);
      const uint8_t* qs = b + (type == QuantType::kQ4_K ? 16 : 48);
      const uint8_t byte = qs[32 * (i / 64) + i % 32];
      int q = i % 64 < 32 ? byte % 16 : byte / 16;
      if (type == QuantType::kQ5_K) q += 16 * Bit(b + 16, 8 * (i % 32) + i / 32);
      return Half(b, 0) * static_cast<float>(sc) * static_cast<float>(q) -
             Half(b, 2) * static_cast<float>(mn);
    }
    default: {  // Q6_K
      const uint8_t byte = b[64 * half + l + 32 * (quarter % 2)];
      const int hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
      const int q = (quarter < 2 ? byte % 16 : byte / 16) + 16 * hi - 32;
      const auto sc = static_cast<int8_t>(b[192 + 8 * half + 2 * quarter + l / 16]);
      return Half(b, 208) * static_cast<float>(sc) * static_cast<float>(q);
    }
  }
}

TEST(DequantizeKQuantTest, EveryTypeMatchesTheFormatDescription) {
  for (QuantType type : kTypes) {
    SCOPED_TRACE(QuantTypeName(type));
    const int values = QuantBlockValues(type);
    EXPECT_EQ(values, type == QuantType::kQ5_0 || type == QuantType::kQ5_1 ? 32 : 256);
    const int64_t blocks = 64;
    const std::vector<std::byte> w = RandomBlocks(type, blocks, 11);
    std::vector<float> got(blocks * values);
    DequantizeBlocks(type, w.data(), blocks * values, got.data());
    for (int64_t bl = 0; bl < blocks; ++bl) {
      const auto* b = reinterpret_cast<const uint8_t*>(w.data() + bl * QuantBlockBytes(type));
      for (int i = 0; i < values; ++i) {
        ASSERT_EQ(got[bl * values + i], RefValue(type, b, i)) << "block " << bl << " value " << i;
      }
    }
  }
}

std::vector<SimdLevel> AvailableLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (DetectedSimd() != SimdLevel::kScalar) levels.push_back(SimdLevel::kAvx2);
  if (DetectedSimd() >= SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

// Each SIMD level gives exactly the bits of the float32 Matmul of the same
// level on the dequantized weights, and is close to the double reference.
TEST(MatmulKQuantTest, EveryPathEqualsMatmulOnDequantizedWeights) {
  ThreadPool pool(3);
  uint32_t seed = 5;
  for (SimdLevel level : AvailableLevels()) {
    for (QuantType type : kTypes) {
      for (int32_t m : {1, 3, 6, 13, 33}) {
        for (int32_t n : {1, 6, 37}) {
          for (int32_t k : {256, 768, 2048}) {
            SCOPED_TRACE(testing::Message() << SimdName(level) << " " << QuantTypeName(type)
                                            << " m " << m << " n " << n << " k " << k);
            const int32_t ldx = k + 3, ldy = n + 2;
            const std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed);
            const std::vector<std::byte> w =
                RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), ++seed);
            const std::vector<float> bias = RandomVector(n, ++seed);
            std::vector<float> w_f32(static_cast<size_t>(n) * k);
            DequantizeBlocks(type, w.data(), int64_t{n} * k, w_f32.data());
            std::vector<float> want(static_cast<size_t>(m) * ldy, 0.0f);
            std::vector<float> got = want, ref = want;
            MatmulWithSimd({x.data(), w_f32.data(), bias.data(), want.data(), m, n, k, ldx, ldy},
                           pool, level);
            const MatmulQuantParams p{x.data(), w.data(), type, bias.data(), got.data(),
                                      m,        n,        k,    ldx,         ldy};
            MatmulQuant(p, pool, level);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
            MatmulQuantParams r = p;
            r.y = ref.data();
            MatmulQuantRef(r);
            ExpectClose(got, ref, 1e-4f * k, 1e-4f);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
