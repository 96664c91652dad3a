// The gated activations of the MLP, computed in float32: SwiGLU (Llama),
// out = SiLU(gate) * up with SiLU(g) = g / (1 + exp(-g)), and GeGLU with the
// tanh approximation of GELU (Gemma's gelu_pytorch_tanh), out = GELU(gate) * up
// with GELU(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).
// The Ref functions are these formulas with libm's expf and tanhf; SiluMul and
// GeluTanhMul take a vectorized exp on AVX2 machines (g * sigmoid(z): within
// a few ulp of the exact value, bounded in activation_test) and the Ref
// arithmetic otherwise.
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
// Takes the same params.
void GeluTanhMulRef(const SiluMulParams<float>& p);
void GeluTanhMul(const SiluMulParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
