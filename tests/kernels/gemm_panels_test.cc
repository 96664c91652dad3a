#include "kernels/cpu/gemm_panels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu::panels {
namespace {

// C[m, columns] (+)= A B (+ bias) in double, and for each output the sum of
// |a| |b| over its products, which bounds float32's rounding error.
struct Reference {
  std::vector<double> c;
  std::vector<double> magnitude;
};

Reference Multiply(const Operands& p, const std::vector<float>& c0) {
  Reference r;
  for (int32_t i = 0; i < p.m; ++i) {
    for (int32_t j = 0; j < p.columns; ++j) {
      double sum = p.accumulate ? c0[i * p.ldc + j] : 0.0;
      double magnitude = std::fabs(sum);
      for (int32_t kk = 0; kk < p.k; ++kk) {
        const double prod = static_cast<double>(p.a[i * p.lda + kk]) * p.b[kk * p.ldb + j];
        sum += prod;
        magnitude += std::fabs(prod);
      }
      if (p.bias != nullptr) {
        sum += p.bias[j];
        magnitude += std::fabs(p.bias[j]);
      }
      r.c.push_back(sum);
      r.magnitude.push_back(magnitude);
    }
  }
  return r;
}

// k sequential FMAs (and one bias add) in float32: each rounding adds at most
// u = 2^-24 of the running magnitude, so the error stays within (k + 1) u
// times the sum of magnitudes (to first order; 1.01 covers the rest).
double Bound(int32_t k, double magnitude) {
  return 1.01 * (k + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
}

TEST(PanelGemmTest, WithinTheFloat32RoundingBoundOfTheExactProduct) {
  if (!Supported(DetectedSimd())) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 1;
  for (int32_t m : {1, 5, 6, 7, 13, 40}) {
    for (int32_t k : {1, 16, 64, 577}) {
      for (int32_t columns : {1, 9, 16}) {
        for (bool accumulate : {false, true}) {
          for (bool with_bias : {false, true}) {
            SCOPED_TRACE(testing::Message()
                         << "m " << m << " k " << k << " columns " << columns << " accumulate "
                         << accumulate << " bias " << with_bias);
            const int64_t lda = k + 3, ldb = kWidth + 5, ldc = columns + 2;
            const std::vector<float> a = RandomVector(m * lda, ++seed);
            const std::vector<float> b = RandomVector(k * ldb, ++seed);
            const std::vector<float> bias = RandomVector(columns, ++seed);
            std::vector<float> c = RandomVector(m * ldc, ++seed);
            const std::vector<float> c0 = c;
            const Operands p{.a = a.data(),
                             .lda = lda,
                             .b = b.data(),
                             .ldb = ldb,
                             .c = c.data(),
                             .ldc = ldc,
                             .m = m,
                             .k = k,
                             .columns = columns,
                             .accumulate = accumulate,
                             .bias = with_bias ? bias.data() : nullptr};
            Gemm(p);
            const Reference want = Multiply(p, c0);
            for (int32_t i = 0; i < m; ++i) {
              for (int32_t j = 0; j < ldc; ++j) {
                const size_t at = i * ldc + j;
                if (j >= columns) {
                  ASSERT_EQ(c[at], c0[at]) << "wrote past the columns at " << i << ", " << j;
                  continue;
                }
                const size_t r = i * columns + j;
                ASSERT_LE(std::fabs(c[at] - want.c[r]), Bound(k, want.magnitude[r]))
                    << i << ", " << j;
              }
            }
          }
        }
      }
    }
  }
}

// Every output is the same sequence of FMAs wherever its row sits in a block
// of 6 and however many rows there are.
TEST(PanelGemmTest, ARowsResultDoesNotDependOnTheOtherRows) {
  if (!Supported(DetectedSimd())) GTEST_SKIP() << "no AVX2";
  const int32_t m = 17, k = 200;
  const std::vector<float> a = RandomVector(m * k, 3);
  const std::vector<float> b = RandomVector(k * kWidth, 4);
  std::vector<float> all(m * kWidth);
  Gemm({.a = a.data(), .lda = k, .b = b.data(), .c = all.data(), .ldc = kWidth, .m = m, .k = k});
  for (int32_t row = 0; row < m; ++row) {
    std::vector<float> alone(kWidth);
    Gemm({.a = a.data() + row * k,
          .lda = k,
          .b = b.data(),
          .c = alone.data(),
          .ldc = kWidth,
          .m = 1,
          .k = k});
    EXPECT_EQ(alone,
              std::vector<float>(all.begin() + row * kWidth, all.begin() + (row + 1) * kWidth))
        << "row " << row;
  }
}

TEST(PanelPackTest, TransposesRowsAndZeroPads) {
  const int k = 5, count = 3;
  std::vector<float> rows(count * 7);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i + 1);
  std::vector<float> panel(k * kWidth, std::numeric_limits<float>::quiet_NaN());
  Pack(rows.data(), 7, count, k, panel.data());
  for (int kk = 0; kk < k; ++kk) {
    for (int j = 0; j < kWidth; ++j) {
      EXPECT_EQ(panel[kk * kWidth + j], j < count ? rows[j * 7 + kk] : 0.0f) << kk << ", " << j;
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cpu::panels
