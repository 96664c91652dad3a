// Row-wise softmax and log-softmax over float32 rows (max-subtracted).
#pragma once

#include <cstdint>

namespace loom::kernels {

class ParallelFor;

struct SoftmaxParams {
  const float* x = nullptr;  // [rows, cols], row stride ld
  float* out = nullptr;      // [rows, cols], row stride ld; may alias x
  int32_t rows = 0;
  int32_t cols = 0;
  int32_t ld = 0;
};

namespace cpu {
void SoftmaxRef(const SoftmaxParams& p);
void Softmax(const SoftmaxParams& p, ParallelFor& pool);
void LogSoftmaxRef(const SoftmaxParams& p);
}  // namespace cpu

}  // namespace loom::kernels
