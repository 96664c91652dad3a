#include "kernels/softmax.h"

#include <cmath>
#include <limits>

#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

float RowMax(const float* x, int32_t cols) {
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < cols; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

void SoftmaxRow(const float* x, float* out, int32_t cols) {
  const float m = RowMax(x, cols);
  double sum = 0.0;
  for (int32_t i = 0; i < cols; ++i) {
    out[i] = std::exp(x[i] - m);
    sum += out[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t i = 0; i < cols; ++i) out[i] *= inv;
}

}  // namespace

void SoftmaxRef(const SoftmaxParams& p) {
  for (int32_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + static_cast<int64_t>(r) * p.ld;
    float* out = p.out + static_cast<int64_t>(r) * p.ld;
    const float m = RowMax(x, p.cols);
    double sum = 0.0;
    for (int32_t i = 0; i < p.cols; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
    for (int32_t i = 0; i < p.cols; ++i) {
      out[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - m) / sum);
    }
  }
}

void LogSoftmaxRef(const SoftmaxParams& p) {
  for (int32_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + static_cast<int64_t>(r) * p.ld;
    float* out = p.out + static_cast<int64_t>(r) * p.ld;
    const float m = RowMax(x, p.cols);
    double sum = 0.0;
    for (int32_t i = 0; i < p.cols; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
    const double log_sum = std::log(sum) + m;
    for (int32_t i = 0; i < p.cols; ++i) out[i] = static_cast<float>(x[i] - log_sum);
  }
}

void Softmax(const SoftmaxParams& p, ParallelFor& pool) {
  pool.Run(p.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) SoftmaxRow(p.x + r * p.ld, p.out + r * p.ld, p.cols);
  });
}

}  // namespace loom::kernels::cpu
