#include "kernels/activation.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vec_exp.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kKappa = 0.044715f;

float Silu(float g) { return g / (1.0f + std::exp(-g)); }

// As PyTorch's GELU(approximate="tanh") on float32.
float GeluTanh(float g) { return 0.5f * g * (1.0f + std::tanh(kBeta * (g + kKappa * g * g * g))); }

template <float (*Act)(float)>
void GatedRows(const SiluMulParams<float>& p, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const float* gate = p.gate + t * p.in_stride;
    const float* up = p.up + t * p.in_stride;
    float* out = p.out + t * p.out_stride;
    for (int32_t i = 0; i < p.dim; ++i) out[i] = Act(gate[i]) * up[i];
  }
}

// The AVX2 path: both activations as g * sigmoid(z), sigmoid(z) = 1 / (1 +
// exp(-z)), with z = g for SiLU and z = 2 sqrt(2 / pi) (g + 0.044715 g^3) for
// GELU, since 0.5 (1 + tanh(u)) = sigmoid(2 u). Exp8 is within 2 ulp of expf,
// so an output is within a few ulp of the scalar formula's (the bound is in
// activation_test). Exp8 saturates: g * sigmoid(z) is g where exp(-z)
// underflows and 0 (within 1e-38 g) where it would overflow.
enum class Gate { kSilu, kGeluTanh };

template <Gate G>
__attribute__((target("avx2,fma"))) inline __m256 Gated8(__m256 g, __m256 up) {
  __m256 z = g;
  if constexpr (G == Gate::kGeluTanh) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    z = _mm256_mul_ps(_mm256_set1_ps(2.0f * kBeta), _mm256_fmadd_ps(_mm256_set1_ps(kKappa), g3, g));
  }
  const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), z));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), up);
}

template <Gate G>
__attribute__((target("avx2,fma"))) void GatedRowsAvx2(const SiluMulParams<float>& p, int64_t begin,
                                                       int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const float* gate = p.gate + t * p.in_stride;
    const float* up = p.up + t * p.in_stride;
    float* out = p.out + t * p.out_stride;
    int32_t i = 0;
    for (; i + 8 <= p.dim; i += 8) {
      _mm256_storeu_ps(out + i, Gated8<G>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    }
    if (i < p.dim) {  // the tail through the same arithmetic
      float g[8] = {}, u[8] = {}, o[8];
      const size_t n = static_cast<size_t>(p.dim - i);
      std::memcpy(g, gate + i, n * sizeof(float));
      std::memcpy(u, up + i, n * sizeof(float));
      _mm256_storeu_ps(o, Gated8<G>(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
      std::memcpy(out + i, o, n * sizeof(float));
    }
  }
}

template <Gate G, float (*Act)(float)>
void Run(const SiluMulParams<float>& p, ParallelFor& pool) {
  const bool avx2 = DetectedSimd() >= SimdLevel::kAvx2;
  pool.Run(p.num_tokens, 2, [&](int64_t begin, int64_t end) {
    if (avx2) {
      GatedRowsAvx2<G>(p, begin, end);
    } else {
      GatedRows<Act>(p, begin, end);
    }
  });
}

}  // namespace

void SiluMulRef(const SiluMulParams<float>& p) { GatedRows<Silu>(p, 0, p.num_tokens); }

void SiluMul(const SiluMulParams<float>& p, ParallelFor& pool) { Run<Gate::kSilu, Silu>(p, pool); }

void GeluTanhMulRef(const SiluMulParams<float>& p) { GatedRows<GeluTanh>(p, 0, p.num_tokens); }

void GeluTanhMul(const SiluMulParams<float>& p, ParallelFor& pool) {
  Run<Gate::kGeluTanh, GeluTanh>(p, pool);
}

}  // namespace loom::kernels::cpu
