// The SwiGLU activation of the Llama MLP: out = SiLU(gate) * up, where
// SiLU(g) = g / (1 + exp(-g)), computed in float32.
#pragma once

#include <cstdint>

namespace loom::kernels {

class ParallelFor;

template <typename T>
struct SiluMulParams {
  // gate and up may live in one fused [num_tokens, 2 * dim] gate_up buffer:
  // then up = gate + dim and in_stride = 2 * dim.
  const T* gate = nullptr;  // [num_tokens, dim], row stride in_stride
  const T* up = nullptr;    // [num_tokens, dim], row stride in_stride
  T* out = nullptr;         // [num_tokens, dim], row stride out_stride
  int32_t num_tokens = 0;
  int32_t dim = 0;
  int32_t in_stride = 0;
  int32_t out_stride = 0;
};

namespace cpu {
void SiluMulRef(const SiluMulParams<float>& p);
void SiluMul(const SiluMulParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
