#include "kernels/cpu/matmul_quant.h"

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/matmul.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

std::vector<SimdLevel> AvailableLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (DetectedSimd() != SimdLevel::kScalar) levels.push_back(SimdLevel::kAvx2);
  if (DetectedSimd() >= SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

// Random blocks: random quants, fp16 scales of either sign between 2^-8 and
// 2^-4, and now and then a subnormal one (the decoders must widen those exactly).
std::vector<std::byte> RandomBlocks(QuantType type, int64_t blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(blocks * QuantBlockBytes(type));
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  auto scale = [&]() -> uint16_t {
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    if (rng() % 16 == 0) return sign | static_cast<uint16_t>(1 + rng() % 0x3ff);
    return sign | static_cast<uint16_t>(0x1c00 + rng() % 0x1000);
  };
  for (int64_t i = 0; i < blocks; ++i) {
    std::byte* block = out.data() + i * QuantBlockBytes(type);
    const uint16_t d = scale();
    std::memcpy(block, &d, 2);
    if (type == QuantType::kQ4_1) {
      const uint16_t m = scale();
      std::memcpy(block + 2, &m, 2);
    }
  }
  return out;
}

TEST(DequantizeBlocksTest, DecodesEachLayout) {
  BlockQ8_0 q8{};
  q8.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) q8.qs[j] = static_cast<int8_t>(j - 16);
  BlockQ4_0 q40{};
  q40.d = 0x4000;  // 2
  BlockQ4_1 q41{};
  q41.d = 0x3c00;  // 1
  q41.m = 0xbc00;  // -1
  for (int j = 0; j < 16; ++j) {
    q40.qs[j] = q41.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  float out[32];
  DequantizeBlocks(QuantType::kQ8_0, &q8, 32, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
  DequantizeBlocks(QuantType::kQ4_0, &q40, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(out[j + 16], 2.0f * (15 - j - 8)) << j;
  }
  DequantizeBlocks(QuantType::kQ4_1, &q41, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], j - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 15 - j - 1.0f) << j;
  }
}

// Each SIMD path gives exactly the bits of the float32 Matmul of the same
// level on the dequantized weights, and is close to the double reference.
TEST(MatmulQuantTest, EveryPathEqualsMatmulOnDequantizedWeights) {
  ThreadPool pool(3);
  uint32_t seed = 7;
  for (SimdLevel level : AvailableLevels()) {
    for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1}) {
      for (int32_t m : {1, 2, 5, 13, 16, 33}) {
        for (int32_t n : {1, 6, 37, 64}) {
          for (int32_t k : {32, 96, 576}) {
            for (bool with_bias : {false, true}) {
              SCOPED_TRACE(testing::Message()
                           << SimdName(level) << " " << QuantTypeName(type) << " m " << m << " n "
                           << n << " k " << k << " bias " << with_bias);
              const int32_t ldx = k + 3;
              const int32_t ldy = n + 2;
              const std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed);
              const std::vector<std::byte> w = RandomBlocks(type, int64_t{n} * k / 32, ++seed);
              const std::vector<float> bias = RandomVector(n, ++seed);
              std::vector<float> w_f32(static_cast<size_t>(n) * k);
              DequantizeBlocks(type, w.data(), n * k, w_f32.data());

              std::vector<float> want(static_cast<size_t>(m) * ldy, 0.0f);
              std::vector<float> got = want, ref = want;
              const float* b = with_bias ? bias.data() : nullptr;
              MatmulWithSimd({x.data(), w_f32.data(), b, want.data(), m, n, k, ldx, ldy}, pool,
                             level);
              const MatmulQuantParams p{x.data(), w.data(), type, b, got.data(), m, n, k, ldx, ldy};
              MatmulQuant(p, pool, level);
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
              MatmulQuantParams r = p;
              r.y = ref.data();
              MatmulQuantRef(r);
              ExpectClose(got, ref, 2e-6f * k, 1e-5f);
            }
          }
        }
      }
    }
  }
}

// A row of x gets the same output bits whatever the batch it is part of.
TEST(MatmulQuantTest, RowResultDoesNotDependOnBatchSize) {
  ThreadPool pool(2);
  const int32_t n = 50, k = 192, m = 40;  // 40 rows widen W, 1 to 3 decode it in registers
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 3);
  const std::vector<std::byte> w = RandomBlocks(QuantType::kQ4_1, int64_t{n} * k / 32, 4);
  std::vector<float> all(static_cast<size_t>(m) * n);
  MatmulQuant({x.data(), w.data(), QuantType::kQ4_1, nullptr, all.data(), m, n, k, k, n}, pool);
  for (int32_t rows : {1, 2, 3}) {
    std::vector<float> few(static_cast<size_t>(rows) * n);
    MatmulQuant({x.data(), w.data(), QuantType::kQ4_1, nullptr, few.data(), rows, n, k, k, n},
                pool);
    for (size_t i = 0; i < few.size(); ++i) ASSERT_EQ(few[i], all[i]) << rows << " rows, " << i;
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
