#include "kernels/activation.h"

#include <cmath>

#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

float Silu(float g) { return g / (1.0f + std::exp(-g)); }

// As PyTorch's GELU(approximate="tanh") on float32.
float GeluTanh(float g) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  return 0.5f * g * (1.0f + std::tanh(kBeta * (g + kKappa * g * g * g)));
}

template <float (*Act)(float)>
void GatedRows(const SiluMulParams<float>& p, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const float* gate = p.gate + t * p.in_stride;
    const float* up = p.up + t * p.in_stride;
    float* out = p.out + t * p.out_stride;
    for (int32_t i = 0; i < p.dim; ++i) out[i] = Act(gate[i]) * up[i];
  }
}

}  // namespace

void SiluMulRef(const SiluMulParams<float>& p) { GatedRows<Silu>(p, 0, p.num_tokens); }

void SiluMul(const SiluMulParams<float>& p, ParallelFor& pool) {
  pool.Run(p.num_tokens, 2, [&](int64_t begin, int64_t end) { GatedRows<Silu>(p, begin, end); });
}

void GeluTanhMulRef(const SiluMulParams<float>& p) { GatedRows<GeluTanh>(p, 0, p.num_tokens); }

void GeluTanhMul(const SiluMulParams<float>& p, ParallelFor& pool) {
  pool.Run(p.num_tokens, 2,
           [&](int64_t begin, int64_t end) { GatedRows<GeluTanh>(p, begin, end); });
}

}  // namespace loom::kernels::cpu
