#include "kernels/cpu/vec_exp.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace loom::kernels::cpu {
namespace {

__attribute__((target("avx2,fma"))) std::vector<float> ExpOf(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 8) {
    _mm256_storeu_ps(y.data() + i, Exp8(_mm256_loadu_ps(x.data() + i)));
  }
  return y;
}

TEST(Exp8Test, WithinTwoUlpOfExpOverItsRange) {
  if (DetectedSimd() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  std::vector<float> x;
  for (float v = -86.9f; v < 88.0f; v += 0.01337f) x.push_back(v);
  x.resize(x.size() / 8 * 8);
  const std::vector<float> y = ExpOf(x);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    ASSERT_LE(std::fabs(y[i] - want), 2 * std::ldexp(1.0, -23) * want) << "exp(" << x[i] << ")";
  }
}

TEST(Exp8Test, MaskedScoresGiveExactlyZero) {
  if (DetectedSimd() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> y = ExpOf({-inf, -1000.0f, -87.5f, 0.0f, 1.0f, -1.0f, 88.0f, 100.0f});
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_NEAR(y[4], std::exp(1.0f), 1e-6f);
  EXPECT_NEAR(y[5], std::exp(-1.0f), 1e-7f);
  EXPECT_EQ(y[6], y[7]);  // saturates
}

}  // namespace
}  // namespace loom::kernels::cpu
