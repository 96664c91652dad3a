// Linear layer y = x W^T (+ bias), with W [n, k] row-major as Hugging Face
// stores nn.Linear weights. Accumulation is float32 whatever T is.
#pragma once

#include <cstdint>

namespace loom::kernels {

class ParallelFor;

template <typename T>
struct MatmulParams {
  const T* x = nullptr;     // [m, k], row stride ldx
  const T* w = nullptr;     // [n, k], row stride k
  const T* bias = nullptr;  // [n] or null
  T* y = nullptr;           // [m, n], row stride ldy; may not alias x
  int32_t m = 0;            // tokens
  int32_t n = 0;            // output features
  int32_t k = 0;            // input features
  int32_t ldx = 0;
  int32_t ldy = 0;
};

namespace cpu {
// From this many rows of x on (prefill), CPU products go through the panel
// GEMM (gemm_panels.h), at about twice the register tiles' FMA rate. Up to 32
// rows (decode batches) the tiles keep each output's bits what they always were.
inline constexpr int32_t kPanelMinRows = 33;

void MatmulRef(const MatmulParams<float>& p);
// Blocked, threaded and vectorised (AVX-512 / AVX2+FMA picked at run time).
void Matmul(const MatmulParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
