#include "kernels/rms_norm.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

// Sixteen independent partial sums: the compiler vectorises them without
// reassociating a single running sum. out may be residual itself (x null):
// every value is read for the sum before any is written.
__attribute__((always_inline)) inline void NormRowBody(const float* x, float* residual,
                                                       const float* weight, float* out,
                                                       int32_t hidden, float eps) {
  if (x != nullptr) {
    for (int32_t i = 0; i < hidden; ++i) residual[i] += x[i];
  }
  float partial[16] = {};
  int32_t i = 0;
  for (; i + 16 <= hidden; i += 16) {
    for (int l = 0; l < 16; ++l) partial[l] += residual[i + l] * residual[i + l];
  }
  float sum = 0.0f;
  for (; i < hidden; ++i) sum += residual[i] * residual[i];
  for (float s : partial) sum += s;
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(hidden) + eps);
  for (int32_t j = 0; j < hidden; ++j) out[j] = residual[j] * inv * weight[j];
}

__attribute__((target("avx512f"))) void NormRowAvx512(const float* x, float* residual,
                                                      const float* weight, float* out,
                                                      int32_t hidden, float eps) {
  NormRowBody(x, residual, weight, out, hidden, eps);
}
__attribute__((target("avx2,fma"))) void NormRowAvx2(const float* x, float* residual,
                                                     const float* weight, float* out,
                                                     int32_t hidden, float eps) {
  NormRowBody(x, residual, weight, out, hidden, eps);
}
void NormRowScalar(const float* x, float* residual, const float* weight, float* out, int32_t hidden,
                   float eps) {
  NormRowBody(x, residual, weight, out, hidden, eps);
}

using NormRowFn = void (*)(const float*, float*, const float*, float*, int32_t, float);

NormRowFn NormRowForCpu() {
  return DetectedSimd() == SimdLevel::kAvx512 ? NormRowAvx512
         : DetectedSimd() == SimdLevel::kAvx2 ? NormRowAvx2
                                              : NormRowScalar;
}

}  // namespace

void RmsNormRef(const RmsNormParams<float>& p) {
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    float* res = p.residual + static_cast<int64_t>(t) * p.hidden;
    if (p.x != nullptr) {
      for (int32_t i = 0; i < p.hidden; ++i) res[i] += p.x[static_cast<int64_t>(t) * p.hidden + i];
    }
    double sum = 0.0;
    for (int32_t i = 0; i < p.hidden; ++i) sum += static_cast<double>(res[i]) * res[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / p.hidden + p.eps));
    for (int32_t i = 0; i < p.hidden; ++i) {
      p.out[static_cast<int64_t>(t) * p.hidden + i] = res[i] * inv * p.weight[i];
    }
  }
}

void HeadRmsNormRef(const HeadRmsNormParams<float>& p) {
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      float* x =
          p.x + static_cast<int64_t>(t) * p.row_stride + static_cast<int64_t>(h) * p.head_dim;
      RmsNormRef({nullptr, x, p.weight, x, 1, p.head_dim, p.eps});
    }
  }
}

void HeadRmsNorm(const HeadRmsNormParams<float>& p, ParallelFor& pool) {
  const NormRowFn row = NormRowForCpu();
  pool.Run(p.num_tokens, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int32_t h = 0; h < p.num_heads; ++h) {
        float* x = p.x + t * p.row_stride + static_cast<int64_t>(h) * p.head_dim;
        row(nullptr, x, p.weight, x, p.head_dim, p.eps);
      }
    }
  });
}

void RmsNorm(const RmsNormParams<float>& p, ParallelFor& pool) {
  const NormRowFn row = NormRowForCpu();
  pool.Run(p.num_tokens, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      row(p.x ? p.x + t * p.hidden : nullptr, p.residual + t * p.hidden, p.weight,
          p.out + t * p.hidden, p.hidden, p.eps);
    }
  });
}

}  // namespace loom::kernels::cpu
