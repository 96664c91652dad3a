#include "kernels/matmul.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(MatmulRefTest, SmallKnownProduct) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};     // [2, 3]
  const std::vector<float> w = {1, 0, -1, 2, 1, 0.5};  // [2, 3]
  const std::vector<float> bias = {10, 20};
  std::vector<float> y(4);
  MatmulParams<float> p{x.data(), w.data(), bias.data(), y.data(), 2, 2, 3, 3, 2};
  MatmulRef(p);
  EXPECT_EQ(y, (std::vector<float>{1 - 3 + 10, 2 + 2 + 1.5f + 20, 4 - 6 + 10, 8 + 5 + 3 + 20}));
}

std::vector<SimdLevel> AvailableLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (DetectedSimd() != SimdLevel::kScalar) levels.push_back(SimdLevel::kAvx2);
  if (DetectedSimd() >= SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

TEST(MatmulTest, EveryPathMatchesReferenceOnOddShapesAndStrides) {
  ThreadPool pool(3);
  uint32_t seed = 1;
  for (SimdLevel level : AvailableLevels()) {
    for (int32_t m : {1, 3, 4, 6, 17, 40}) {
      for (int32_t n : {1, 5, 16, 37}) {
        for (int32_t k : {1, 7, 16, 33, 576}) {
          for (bool with_bias : {false, true}) {
            const int32_t ldx = k + 3;
            const int32_t ldy = n + 2;
            const std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed);
            const std::vector<float> w = RandomVector(static_cast<size_t>(n) * k, ++seed);
            const std::vector<float> bias = RandomVector(n, ++seed);
            std::vector<float> want(static_cast<size_t>(m) * ldy, 0.0f);
            std::vector<float> got = want;
            MatmulParams<float> p{x.data(),    w.data(), with_bias ? bias.data() : nullptr,
                                  want.data(), m,        n,
                                  k,           ldx,      ldy};
            MatmulRef(p);
            p.y = got.data();
            MatmulWithSimd(p, pool, level);
            SCOPED_TRACE(testing::Message() << SimdName(level) << " m " << m << " n " << n << " k "
                                            << k << " bias " << with_bias);
            ExpectClose(got, want, 2e-5f * k, 1e-5f);
          }
        }
      }
    }
  }
}

TEST(MatmulBf16Test, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.140625f)), 3.140625f);  // exact in bf16
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);              // tie: to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82);              // tie: to even (up)
}

TEST(MatmulBf16Test, EveryPathMatchesReference) {
  ThreadPool pool(3);
  uint32_t seed = 100;
  for (SimdLevel level : AvailableLevels()) {
    for (int32_t m : {1, 4, 7, 35}) {
      for (int32_t n : {3, 16, 37}) {
        for (int32_t k : {5, 16, 48, 576}) {
          const int32_t ldx = k + 1;
          const int32_t ldy = n + 3;
          const std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed);
          const std::vector<float> wf = RandomVector(static_cast<size_t>(n) * k, ++seed);
          const std::vector<float> bias = RandomVector(n, ++seed);
          std::vector<uint16_t> w;
          for (float v : wf) w.push_back(FloatToBFloat16(v));
          std::vector<float> got(static_cast<size_t>(m) * ldy, 0.0f);
          MatmulBf16(
              MatmulBf16Params{x.data(), w.data(), bias.data(), got.data(), m, n, k, ldx, ldy},
              pool, level);
          std::vector<float> want(got.size(), 0.0f);
          MatmulBf16Ref({x.data(), w.data(), bias.data(), want.data(), m, n, k, ldx, ldy});
          SCOPED_TRACE(testing::Message()
                       << SimdName(level) << " m " << m << " n " << n << " k " << k);
          ExpectClose(got, want, 2e-5f * k, 1e-5f);
        }
      }
    }
  }
}

// A row's outputs must not depend on the other rows of x within a path (tile
// position, or the bfloat16 path switching from in-register to per-task
// widening up to 32 rows; the panel GEMM from 33 on): the CPU executor's
// seeded sampling relies on it for decode batches.
TEST(MatmulBf16Test, RowsAreBitIdenticalWhateverTheBatchOnEachPath) {
  ThreadPool pool(2);
  const int32_t n = 45, k = 200;
  std::vector<uint16_t> w;
  std::vector<float> w_widened;
  for (float v : RandomVector(static_cast<size_t>(n) * k, 8)) {
    w.push_back(FloatToBFloat16(v));
    w_widened.push_back(BFloat16ToFloat(w.back()));
  }
  const std::vector<float> bias = RandomVector(n, 9);
  for (int32_t m : {13, 37}) {
    const int32_t fewest = m > 32 ? 33 : 1;  // the smallest batch on the same path
    const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 7);
    for (SimdLevel level : AvailableLevels()) {
      std::vector<float> batched(static_cast<size_t>(m) * n);
      MatmulBf16({x.data(), w.data(), bias.data(), batched.data(), m, n, k, k, n}, pool, level);
      std::vector<float> f32(batched.size());
      MatmulWithSimd({x.data(), w_widened.data(), bias.data(), f32.data(), m, n, k, k, n}, pool,
                     level);
      EXPECT_EQ(f32, batched) << SimdName(level);
      for (int32_t row : {0, (m - fewest) / 2, m - fewest}) {
        std::vector<float> alone(static_cast<size_t>(fewest) * n);
        MatmulBf16({x.data() + static_cast<size_t>(row) * k, w.data(), bias.data(), alone.data(),
                    fewest, n, k, k, n},
                   pool, level);
        alone.resize(n);
        EXPECT_EQ(alone, std::vector<float>(batched.begin() + static_cast<size_t>(row) * n,
                                            batched.begin() + static_cast<size_t>(row + 1) * n))
            << SimdName(level) << " m " << m << " row " << row;
      }
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
