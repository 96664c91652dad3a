#include "kernels/activation.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

double Gelu(double g) {
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
}

// Each output of the fast path against the activation in double precision,
// for a fused [tokens, 2 * dim] gate_up buffer: within `relative`, or 1e-12
// absolute where the product underflows toward 0. SiLU's is a few ulp; GELU's
// sigmoid argument z reaches |z| ~ 25 for g in [-6, 6], and the rounding of z
// (|z| * 6e-8) moves sigmoid(z) by up to that much relative where it is small.
constexpr double kSiluRelative = 1e-6;
constexpr double kGeluRelative = 4e-6;

template <typename Exact>
void ExpectNearExact(const std::vector<float>& gate_up, int32_t dim, const std::vector<float>& out,
                     Exact exact, double relative) {
  const size_t tokens = out.size() / dim;
  for (size_t t = 0; t < tokens; ++t) {
    for (int32_t i = 0; i < dim; ++i) {
      const double g = gate_up[t * 2 * dim + i];
      const double u = gate_up[t * 2 * dim + dim + i];
      const double want = exact(g) * u;
      EXPECT_NEAR(out[t * dim + i], want, relative * std::fabs(want) + 1e-12)
          << "token " << t << " i " << i << " g " << g;
    }
  }
}

TEST(ActivationTest, FastPathsSaturateAtTheEnds) {
  ThreadPool pool(1);
  // gate values in the first half (dim 13: one vector and a tail), up = 1.5.
  const std::vector<float> gates = {-200, -90, -45, -20, -5, -1e-3f, 0, 1e-3f, 5, 20, 45, 90, 200};
  const int32_t dim = static_cast<int32_t>(gates.size());
  std::vector<float> gate_up(gates);
  gate_up.resize(2 * gates.size(), 1.5f);
  std::vector<float> out(gates.size());
  const SiluMulParams<float> p{
      gate_up.data(), gate_up.data() + dim, out.data(), 1, dim, 2 * dim, dim};
  SiluMul(p, pool);
  ExpectNearExact(
      gate_up, dim, out, [](double g) { return g / (1 + std::exp(-g)); }, kSiluRelative);
  GeluTanhMul(p, pool);
  ExpectNearExact(gate_up, dim, out, Gelu, kGeluRelative);
  EXPECT_EQ(out[12], 300.0f);  // GELU(200) * 1.5
}

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
  ExpectNearExact(
      gate_up, dim, fast, [](double g) { return g / (1 + std::exp(-g)); }, kSiluRelative);
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
  ExpectNearExact(gate_up, dim, fast, Gelu, kGeluRelative);
  for (int32_t i = 0; i < dim; ++i) {
    const double g = gate_up[4 * 2 * dim + i];
    const double u = gate_up[4 * 2 * dim + dim + i];
    const double gelu = Gelu(g);
    EXPECT_NEAR(ref[4 * dim + i], gelu * u, 1e-5 * (1 + std::fabs(gelu * u)));
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
