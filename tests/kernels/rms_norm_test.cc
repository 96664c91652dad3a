#include "kernels/rms_norm.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(RmsNormRefTest, NormalisesByRootMeanSquare) {
  std::vector<float> residual = {3, 4};
  const std::vector<float> weight = {1, 2};
  std::vector<float> out(2);
  RmsNormRef({nullptr, residual.data(), weight.data(), out.data(), 1, 2, 0.0f});
  const float rms = std::sqrt((9.0f + 16.0f) / 2.0f);
  EXPECT_NEAR(out[0], 3 / rms, 1e-6);
  EXPECT_NEAR(out[1], 2 * 4 / rms, 1e-6);
}

TEST(RmsNormTest, FusedResidualAddMatchesReference) {
  ThreadPool pool(2);
  for (bool with_x : {false, true}) {
    for (int32_t hidden : {5, 64, 576, 1000}) {
      const int32_t tokens = 9;
      const std::vector<float> x = RandomVector(static_cast<size_t>(tokens) * hidden, 1);
      const std::vector<float> res0 = RandomVector(static_cast<size_t>(tokens) * hidden, 2);
      const std::vector<float> weight = RandomVector(hidden, 3, 0.5f, 1.5f);
      std::vector<float> res_ref = res0;
      std::vector<float> res_fast = res0;
      std::vector<float> out_ref(res0.size());
      std::vector<float> out_fast(res0.size());
      const float* xp = with_x ? x.data() : nullptr;
      RmsNormRef({xp, res_ref.data(), weight.data(), out_ref.data(), tokens, hidden, 1e-5f});
      RmsNorm({xp, res_fast.data(), weight.data(), out_fast.data(), tokens, hidden, 1e-5f}, pool);
      SCOPED_TRACE(testing::Message() << "hidden " << hidden << " with_x " << with_x);
      EXPECT_EQ(res_fast, res_ref);
      if (with_x) {
        EXPECT_FLOAT_EQ(res_ref[7], res0[7] + x[7]);
      }
      ExpectClose(out_fast, out_ref, 1e-5f, 1e-5f);
    }
  }
}

// q/k norm: every head of every token normalised on its own, in place, the
// rest of the row (other heads, v) untouched.
TEST(HeadRmsNormTest, NormalisesEachHeadInPlace) {
  ThreadPool pool(2);
  const int32_t tokens = 6, heads = 3, head_dim = 32, stride = 5 * head_dim;
  const std::vector<float> x0 = RandomVector(static_cast<size_t>(tokens) * stride, 8, -4, 4);
  const std::vector<float> weight = RandomVector(head_dim, 9, 0.5f, 1.5f);
  std::vector<float> ref = x0, fast = x0;
  HeadRmsNormRef({ref.data(), weight.data(), stride, tokens, heads, head_dim, 1e-6f});
  HeadRmsNorm({fast.data(), weight.data(), stride, tokens, heads, head_dim, 1e-6f}, pool);
  ExpectClose(fast, ref, 1e-5f, 1e-5f);
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      const float* in = &x0[t * stride + h * head_dim];
      double ss = 0;
      for (int32_t i = 0; i < head_dim; ++i) ss += double{in[i]} * in[i];
      const double inv = 1 / std::sqrt(ss / head_dim + 1e-6);
      for (int32_t i = 0; i < head_dim; ++i) {
        EXPECT_NEAR(ref[t * stride + h * head_dim + i], in[i] * inv * weight[i], 1e-5);
      }
    }
    for (int32_t i = heads * head_dim; i < stride; ++i)
      EXPECT_EQ(ref[t * stride + i], x0[t * stride + i]);
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
