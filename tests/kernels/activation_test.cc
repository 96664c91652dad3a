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

}  // namespace
}  // namespace loom::kernels::cpu
