// Rotary position embedding fused with the KV-cache write. Rotation is the
// Hugging Face half-split (NeoX) form over the whole head:
//   for i < d/2, theta = pos * inv_freq[i]:
//   x'[i]       = x[i] * cos(theta) - x[i + d/2] * sin(theta)
//   x'[i + d/2] = x[i + d/2] * cos(theta) + x[i] * sin(theta)
// (GGUF checkpoints, which store Q/K rows permuted for the interleaved form, are
// un-permuted at load.) Angles are float32 pos * inv_freq as in transformers.
#pragma once

#include <cstdint>

#include "kernels/paged_kv.h"

namespace loom::kernels {

class ParallelFor;

enum class RopeScalingType : int32_t {
  kNone = 0,
  kLinear = 1,  // inv_freq divided by factor
  kLlama3 = 2,  // Llama 3.1 frequency-dependent scaling
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_max_position = 8192;
};

// Fills inv_freq[0, head_dim / 2) for base `theta` and the given scaling (host).
void ComputeRopeInvFreq(float theta, int32_t head_dim, const RopeScaling& scaling, float* inv_freq);

// Rotates q in place, rotates k and writes it with v into the paged pools of
// kv at kv.slot_mapping[t]; positions come from kv.positions. q, k and v may be
// column ranges of one fused qkv buffer (then their strides are its row stride).
template <typename T>
struct RopeKvWriteParams {
  T* q = nullptr;        // [num_tokens, num_heads * head_dim], row stride q_stride
  const T* k = nullptr;  // [num_tokens, num_kv_heads * head_dim], row stride k_stride
  const T* v = nullptr;  // [num_tokens, num_kv_heads * head_dim], row stride v_stride
  int32_t q_stride = 0;
  int32_t k_stride = 0;
  int32_t v_stride = 0;
  int32_t num_heads = 0;
  const float* inv_freq = nullptr;  // [head_dim / 2]
  PagedKv<T> kv;  // uses caches, head geometry, positions, slot_mapping, num_tokens
};

namespace cpu {
void RopeKvWriteRef(const RopeKvWriteParams<float>& p);
void RopeKvWrite(const RopeKvWriteParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
