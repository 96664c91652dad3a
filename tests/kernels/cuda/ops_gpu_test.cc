// Embedding (scaled too), residual + RMSNorm, the q/k head norm, SiLU*mul and
// GELU-tanh*mul and the bf16 GEMM against the CPU references over a table of
// shapes, in float and bf16.
#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activation.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cuda/gpu_test_util.h"

namespace loom::testing {
namespace {

namespace kc = kernels::cuda;
using bf16 = __nv_bfloat16;

template <typename T>
class OpsGpuTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(OpsGpuTest, StorageTypes);

TYPED_TEST(OpsGpuTest, EmbeddingMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  for (auto [tokens, hidden, vocab] : {std::tuple{1, 64, 10}, {7, 576, 1000}, {33, 4096, 300}}) {
    std::vector<float> table = RandomValues<T>(size_t(vocab) * hidden, 1);
    std::vector<int32_t> ids(tokens);
    for (int i = 0; i < tokens; ++i) ids[i] = (i * 7919) % vocab;
    std::vector<float> ref(size_t(tokens) * hidden);
    kernels::cpu::EmbeddingRef({ids.data(), table.data(), ref.data(), tokens, hidden, vocab});
    GuardedBuffer<T> d_table(table), d_out(ref.size());
    IntBuffer d_ids(ids);
    LOOM_CUDA_CHECK_OK(kc::Embedding<T>(
        {d_ids.get(), d_table.get(), d_out.get(), tokens, hidden, vocab}, nullptr));
    ExpectNear(d_out.Download(), ref, 0.0f, 0.0f);
    EXPECT_TRUE(d_out.GuardsIntact());
  }
}

TYPED_TEST(OpsGpuTest, ResidualRmsNormMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  for (auto [tokens, hidden] :
       {std::pair{1, 64}, {5, 576}, {17, 4096}, {3, 8192 / int(sizeof(T) / 2)}}) {
    for (bool add : {false, true}) {
      const size_t n = size_t(tokens) * hidden;
      std::vector<float> x = RandomValues<T>(n, 2), res = RandomValues<T>(n, 3, -4.0f, 4.0f);
      std::vector<float> w = RandomValues<T>(hidden, 4, 0.5f, 1.5f);
      GuardedBuffer<T> d_x(x), d_res(res), d_w(w), d_out(n);
      std::vector<float> ref(n);
      kernels::cpu::RmsNormRef(
          {add ? x.data() : nullptr, res.data(), w.data(), ref.data(), tokens, hidden, 1e-5f});
      LOOM_CUDA_CHECK_OK(kc::RmsNorm<T>(
          {add ? d_x.get() : nullptr, d_res.get(), d_w.get(), d_out.get(), tokens, hidden, 1e-5f},
          nullptr));
      // The residual is stored in T before normalisation: compare it exactly
      // after the same rounding, and the output within tolerance.
      std::vector<float> res_rounded = res;
      for (float& v : res_rounded) v = ToHost(FromHost<T>(v));
      ExpectNear<T>(d_res.Download(), res_rounded);
      ExpectNear<T>(d_out.Download(), ref);
      EXPECT_TRUE(d_out.GuardsIntact() && d_res.GuardsIntact());
    }
  }
}

TYPED_TEST(OpsGpuTest, SiluMulMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  // 70,000 tokens: more rows than grid.y can hold (65,535).
  for (auto [tokens, dim] : {std::pair{1, 64}, {9, 1536}, {4, 14336}, {70000, 16}}) {
    // Fused gate_up layout: gate in the first half of each row, up in the second.
    std::vector<float> gu = RandomValues<T>(size_t(tokens) * 2 * dim, 5, -6.0f, 6.0f);
    std::vector<float> ref(size_t(tokens) * dim);
    kernels::cpu::SiluMulRef({gu.data(), gu.data() + dim, ref.data(), tokens, dim, 2 * dim, dim});
    GuardedBuffer<T> d_gu(gu), d_out(ref.size());
    LOOM_CUDA_CHECK_OK(kc::SiluMul<T>(
        {d_gu.get(), d_gu.get() + dim, d_out.get(), tokens, dim, 2 * dim, dim}, nullptr));
    ExpectNear<T>(d_out.Download(), ref);
    EXPECT_TRUE(d_out.GuardsIntact());
  }
}

TYPED_TEST(OpsGpuTest, GeluTanhMulMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  for (auto [tokens, dim] : {std::pair{1, 64}, {9, 2048}, {70000, 16}}) {
    std::vector<float> gu = RandomValues<T>(size_t(tokens) * 2 * dim, 15, -6.0f, 6.0f);
    std::vector<float> ref(size_t(tokens) * dim);
    kernels::cpu::GeluTanhMulRef(
        {gu.data(), gu.data() + dim, ref.data(), tokens, dim, 2 * dim, dim});
    GuardedBuffer<T> d_gu(gu), d_out(ref.size());
    LOOM_CUDA_CHECK_OK(kc::GeluTanhMul<T>(
        {d_gu.get(), d_gu.get() + dim, d_out.get(), tokens, dim, 2 * dim, dim}, nullptr));
    ExpectNear<T>(d_out.Download(), ref);
    EXPECT_TRUE(d_out.GuardsIntact());
  }
}

// q/k norm in place over the heads of a fused qkv row; the rest of the row
// (here v) stays as it was.
TYPED_TEST(OpsGpuTest, HeadRmsNormMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  for (auto [tokens, heads, head_dim] : {std::tuple{1, 1, 64}, {7, 4, 256}, {33, 8, 128}}) {
    const int stride = (heads + 1) * head_dim;
    std::vector<float> x = RandomValues<T>(size_t(tokens) * stride, 16, -4.0f, 4.0f);
    std::vector<float> w = RandomValues<T>(head_dim, 17, 0.5f, 1.5f);
    std::vector<float> ref = x;
    kernels::cpu::HeadRmsNormRef({ref.data(), w.data(), stride, tokens, heads, head_dim, 1e-6f});
    GuardedBuffer<T> d_x(x), d_w(w);
    LOOM_CUDA_CHECK_OK(kc::HeadRmsNorm<T>(
        {d_x.get(), d_w.get(), stride, tokens, heads, head_dim, 1e-6f}, nullptr));
    ExpectNear<T>(d_x.Download(), ref);
    EXPECT_TRUE(d_x.GuardsIntact());
  }
}

TYPED_TEST(OpsGpuTest, ScaledEmbeddingMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  const int tokens = 5, hidden = 640, vocab = 50;
  std::vector<float> table = RandomValues<T>(size_t(vocab) * hidden, 18);
  std::vector<int32_t> ids = {0, 49, 7, 7, 20};
  std::vector<float> ref(size_t(tokens) * hidden);
  const float scale = std::sqrt(640.0f);
  kernels::cpu::EmbeddingRef({ids.data(), table.data(), ref.data(), tokens, hidden, vocab, scale});
  GuardedBuffer<T> d_table(table), d_out(ref.size());
  IntBuffer d_ids(ids);
  LOOM_CUDA_CHECK_OK(kc::Embedding<T>(
      {d_ids.get(), d_table.get(), d_out.get(), tokens, hidden, vocab, scale}, nullptr));
  ExpectNear<T>(d_out.Download(), ref);
  EXPECT_TRUE(d_out.GuardsIntact());
}

void CheckMatmuls(cuda::Gemm& gemm) {
  for (auto [m, n, k] :
       // 70,000 rows: the bias kernel walks rows past grid.y's 65,535.
       {std::tuple{1, 64, 64},
        {7, 576, 1536},
        {64, 1024, 4096},
        {300, 384, 200},
        {70000, 16, 16}}) {
    for (bool bias : {false, true}) {
      std::vector<float> x = RandomValues<bf16>(size_t(m) * k, 6);
      std::vector<float> w = RandomValues<bf16>(size_t(n) * k, 7);
      std::vector<float> b = RandomValues<bf16>(n, 8);
      std::vector<float> ref(size_t(m) * n);
      kernels::cpu::MatmulRef(
          {x.data(), w.data(), bias ? b.data() : nullptr, ref.data(), m, n, k, k, n});
      GuardedBuffer<bf16> d_x(x), d_w(w), d_b(b), d_y(ref.size());
      LOOM_CUDA_CHECK_OK(
          kc::Matmul({d_x.get(), d_w.get(), bias ? d_b.get() : nullptr, d_y.get(), m, n, k, k, n},
                     gemm, nullptr));
      // Sums of k products of magnitude <= 1: scale atol with sqrt(k).
      ExpectNear(d_y.Download(), ref, 0.02f * std::sqrt(float(k)) / 8.0f, 0.02f);
      EXPECT_TRUE(d_y.GuardsIntact());
    }
  }
}

// Run with the heuristic's first algorithm, then with the fastest of 8 timed
// candidates (new Gemm objects, so that each shape is planned again).
TEST(GemmGpuTest, Bf16MatmulMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  for (int timed : {0, 8}) {
    SCOPED_TRACE(::testing::Message() << "algorithms timed " << timed);
    cuda::Gemm gemm;
    gemm.set_algorithms_timed(timed);
    CheckMatmuls(gemm);
    if (timed == 0) {
      EXPECT_EQ(gemm.timed_shapes(), 0);
    }
    EXPECT_LE(gemm.timed_shapes(), 4);  // one plan per shape
  }
}

}  // namespace
}  // namespace loom::testing
