// RMSNorm fused with the residual add that precedes it in a Llama block:
//   if x: residual += x;   out = residual * rsqrt(mean(residual^2) + eps) * weight
// Statistics are computed in float32 whatever T is (as Hugging Face does).
#pragma once

#include <cstdint>

namespace loom::kernels {

class ParallelFor;

template <typename T>
struct RmsNormParams {
  const T* x = nullptr;       // [num_tokens, hidden] added into residual first; null = no add
  T* residual = nullptr;      // [num_tokens, hidden], updated in place when x is set
  const T* weight = nullptr;  // [hidden]
  T* out = nullptr;           // [num_tokens, hidden]; may not alias residual
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  float eps = 1e-5f;
};

// RMSNorm of every head of q or k in place (Qwen3's and Gemma 3's q/k norm):
// x[t * row_stride + h * head_dim + i] for t < num_tokens, h < num_heads, with
// one weight vector [head_dim] for all heads.
template <typename T>
struct HeadRmsNormParams {
  T* x = nullptr;
  const T* weight = nullptr;  // [head_dim]
  int32_t row_stride = 0;     // elements from one token's heads to the next's
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 0;
  float eps = 1e-6f;
};

namespace cpu {
void RmsNormRef(const RmsNormParams<float>& p);
void RmsNorm(const RmsNormParams<float>& p, ParallelFor& pool);
void HeadRmsNormRef(const HeadRmsNormParams<float>& p);
void HeadRmsNorm(const HeadRmsNormParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
