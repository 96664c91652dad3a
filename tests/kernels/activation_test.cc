#include "kernels/activation.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(SiluMulTest, FusedGateUpBufferMatchesFormulaAndReference) {
  ThreadPool pool(2);
  const int32_t tokens = 7;
  const int32_t dim = 37;
  const std::vector<float> gate_up = RandomVector(static_cast<size_t>(tokens) * 2 * dim, 4, -6, 6);
  std::vector<float> ref(static_cast<size_t>(tokens) * dim);
  std::vector<float> fast(ref.size());
  SiluMulParams<float> p{
      gate_up.data(), gate_up.data() + dim, ref.data(), tokens, dim, 2 * dim, dim};
  SiluMulRef(p);
  p.out = fast.data();
  SiluMul(p, pool);
  EXPECT_EQ(fast, ref);
  const float g = gate_up[2 * dim + 3];
  const float u = gate_up[2 * dim + dim + 3];
  EXPECT_NEAR(ref[dim + 3], g / (1 + std::exp(-g)) * u, 1e-6f);
}

TEST(GeluTanhMulTest, MatchesTheTanhApproximationAndReference) {
  ThreadPool pool(2);
  const int32_t tokens = 5;
  const int32_t dim = 41;
  const std::vector<float> gate_up = RandomVector(static_cast<size_t>(tokens) * 2 * dim, 5, -6, 6);
  std::vector<float> ref(static_cast<size_t>(tokens) * dim);
  std::vector<float> fast(ref.size());
  SiluMulParams<float> p{
      gate_up.data(), gate_up.data() + dim, ref.data(), tokens, dim, 2 * dim, dim};
  GeluTanhMulRef(p);
  p.out = fast.data();
  GeluTanhMul(p, pool);
  EXPECT_EQ(fast, ref);
  for (int32_t i = 0; i < dim; ++i) {
    const double g = gate_up[4 * 2 * dim + i];
    const double u = gate_up[4 * 2 * dim + dim + i];
    const double gelu = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(ref[4 * dim + i], gelu * u, 1e-5 * (1 + std::fabs(gelu * u)));
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
