#include "kernels/activation.h"

#include <cmath>

#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

float Silu(float g) { return g / (1.0f + std::exp(-g)); }

void SiluMulRows(const SiluMulParams<float>& p, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const float* gate = p.gate + t * p.in_stride;
    const float* up = p.up + t * p.in_stride;
    float* out = p.out + t * p.out_stride;
    for (int32_t i = 0; i < p.dim; ++i) out[i] = Silu(gate[i]) * up[i];
  }
}

}  // namespace

void SiluMulRef(const SiluMulParams<float>& p) { SiluMulRows(p, 0, p.num_tokens); }

void SiluMul(const SiluMulParams<float>& p, ParallelFor& pool) {
  pool.Run(p.num_tokens, 2, [&](int64_t begin, int64_t end) { SiluMulRows(p, begin, end); });
}

}  // namespace loom::kernels::cpu
