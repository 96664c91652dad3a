#include "kernels/cpu/matmul_quant.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_quant_int8.h"
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
    if (type == QuantType::kQ4_1 || type == QuantType::kQ5_1) {
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

// Whether MatmulQuant takes the int8 path when asked to (Q4 weights, prefill,
// AVX2).
bool TakesInt8Path(QuantType type, int32_t m, SimdLevel level) {
  (void)m;
  return int8::Supported(type, level);
}

// Checks y (the int8 path's output) against x W^T in double. Rounding x to
// int8 moves each value by at most half its block's step, max |x| / 254; the
// float32 sums add at most 1e-5 of the magnitudes for k <= 1024.
void ExpectWithinInt8Bound(const std::vector<float>& x, int32_t ldx, const std::vector<float>& w,
                           const std::vector<float>& bias, const std::vector<float>& y, int32_t ldy,
                           int32_t m, int32_t n, int32_t k) {
  int failures = 0;
  for (int32_t i = 0; i < m && failures < 10; ++i) {
    const float* xi = x.data() + static_cast<size_t>(i) * ldx;
    for (int32_t j = 0; j < n && failures < 10; ++j) {
      const float* wj = w.data() + static_cast<size_t>(j) * k;
      double exact = bias.empty() ? 0.0 : bias[j], magnitude = 0.0, rounding = 0.0;
      for (int32_t b = 0; b < k; b += 32) {
        double amax = 0.0, w_abs = 0.0;
        for (int32_t kk = b; kk < b + 32; ++kk) {
          exact += static_cast<double>(xi[kk]) * wj[kk];
          magnitude += std::fabs(static_cast<double>(xi[kk]) * wj[kk]);
          amax = std::max(amax, std::fabs(static_cast<double>(xi[kk])));
          w_abs += std::fabs(wj[kk]);
        }
        rounding += amax / 254 * w_abs;
      }
      const double got = y[static_cast<size_t>(i) * ldy + j];
      if (!(std::fabs(got - exact) <= 1.01 * rounding + 1e-5 * magnitude + 1e-6)) {
        ADD_FAILURE() << "row " << i << " column " << j << ": got " << got << " want " << exact
                      << " bound " << 1.01 * rounding + 1e-5 * magnitude;
        ++failures;
      }
    }
  }
}

// Each SIMD path gives exactly the bits of the float32 Matmul of the same
// level on the dequantized weights, and is close to the double reference;
// with quantize_x, the int8 path stays within the rounding of x to int8.
TEST(MatmulQuantTest, EveryPathEqualsMatmulOnDequantizedWeights) {
  ThreadPool pool(3);
  uint32_t seed = 7;
  for (SimdLevel level : AvailableLevels()) {
    for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1}) {
      for (int32_t m : {1, 2, 5, 13, 16, 33}) {
        for (int32_t n : {1, 6, 37, 64}) {
          for (int32_t k : {32, 96, 576, 800, 1536}) {
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
              if (TakesInt8Path(type, m, level)) {
                std::vector<float> rounded(got.size(), 0.0f);
                MatmulQuantParams q = p;
                q.y = rounded.data();
                q.quantize_x = true;
                MatmulQuant(q, pool, level);
                ExpectWithinInt8Bound(x, ldx, w_f32, with_bias ? bias : std::vector<float>(),
                                      rounded, ldy, m, n, k);
              }
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

// A row of x gets the same output bits in every batch of up to 32 rows (the
// register tiles, or the float32 tiles on W widened once, as AVX-512 does
// from 8 rows on: decode) and in every batch of more (the panel GEMM,
// prefill), which sums in another order: there it stays within float32's
// rounding of the exact product.
TEST(MatmulQuantTest, RowResultDependsOnlyOnWhichSideOf32RowsItsBatchIs) {
  ThreadPool pool(2);
  const int32_t n = 50, k = 192, m = 40;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 3);
  const std::vector<std::byte> w = RandomBlocks(QuantType::kQ4_1, int64_t{n} * k / 32, 4);
  auto run = [&](int32_t first_row, int32_t rows) {
    std::vector<float> y(static_cast<size_t>(rows) * n);
    MatmulQuant({x.data() + static_cast<size_t>(first_row) * k, w.data(), QuantType::kQ4_1, nullptr,
                 y.data(), rows, n, k, k, n},
                pool);
    return y;
  };
  const std::vector<float> small = run(0, 32);
  for (int32_t rows : {1, 2, 3}) {
    const std::vector<float> few = run(0, rows);
    for (size_t i = 0; i < few.size(); ++i) ASSERT_EQ(few[i], small[i]) << rows << " rows, " << i;
  }
  const std::vector<float> large = run(0, m);
  const std::vector<float> shifted = run(m - 33, 33);
  for (size_t i = 0; i < shifted.size(); ++i) {
    ASSERT_EQ(shifted[i], large[(m - 33) * n + i]) << i;
  }
  std::vector<float> ref(large.size());
  MatmulQuantRef({x.data(), w.data(), QuantType::kQ4_1, nullptr, ref.data(), m, n, k, k, n});
  ExpectClose(large, ref, 2e-6f * k, 1e-5f);
}

// The int8 path on a prefill-sized product with the default model's shapes,
// and with rows of very different scales (each block has its own); a row's
// result does not depend on the other rows there either.
TEST(MatmulQuantTest, Int8PathStaysWithinTheRoundingOfX) {
  if (DetectedSimd() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  ThreadPool pool(2);
  uint32_t seed = 50;
  for (QuantType type :
       {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ5_0, QuantType::kQ5_1}) {
    const int32_t m = 70, n = 83, k = 576;
    std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, ++seed, -2, 2);
    for (int32_t i = 0; i < m; ++i) x[static_cast<size_t>(i) * k + i] *= 1000.0f;
    const std::vector<std::byte> w = RandomBlocks(type, int64_t{n} * k / 32, ++seed);
    const std::vector<float> bias = RandomVector(n, ++seed);
    std::vector<float> w_f32(static_cast<size_t>(n) * k);
    DequantizeBlocks(type, w.data(), n * k, w_f32.data());
    std::vector<float> y(static_cast<size_t>(m) * n);
    MatmulQuantParams p{x.data(), w.data(), type, bias.data(), y.data(), m, n, k, k, n};
    p.quantize_x = true;
    MatmulQuant(p, pool);
    SCOPED_TRACE(QuantTypeName(type));
    // Not the float32 result: the rounding of x shows.
    std::vector<float> exact(y.size());
    p.y = exact.data();
    p.quantize_x = false;
    MatmulQuant(p, pool);
    EXPECT_NE(exact, y);
    ExpectWithinInt8Bound(x, k, w_f32, bias, y, n, m, n, k);
    std::vector<float> tail(static_cast<size_t>(33) * n);
    p = {x.data() + static_cast<size_t>(m - 33) * k,
         w.data(),
         type,
         bias.data(),
         tail.data(),
         33,
         n,
         k,
         k,
         n};
    p.quantize_x = true;
    MatmulQuant(p, pool);
    EXPECT_EQ(tail, std::vector<float>(y.begin() + static_cast<size_t>(m - 33) * n, y.end()));
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
