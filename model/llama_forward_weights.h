// The CPU forward pass's copy of a Llama-family model's weights, converted at
// load from any WeightStore dtype to float32 or bfloat16 (linear layers; norms
// and the embedding table stay float32), with q/k/v and gate/up fused into one
// matrix each so that a layer runs two input GEMMs instead of five.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/parallel.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

enum class LinearDType { kFloat32, kBFloat16 };

// A linear layer's weight [n, k] (rows = output features), in one of two forms.
struct LinearWeight {
  LinearDType dtype = LinearDType::kFloat32;
  int32_t n = 0;
  int32_t k = 0;
  std::vector<float> f32;      // [n, k] when kFloat32
  std::vector<uint16_t> bf16;  // [n, k] when kBFloat16
  std::vector<float> bias;     // [n], or empty

  int64_t NumBytes() const;
};

struct LlamaLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  LinearWeight qkv;               // [(heads + 2 * kv_heads) * head_dim, hidden]
  LinearWeight o_proj;            // [hidden, heads * head_dim]
  std::vector<float> post_norm;   // [hidden]
  LinearWeight gate_up;           // [2 * intermediate, hidden]: gate rows, then up rows
  LinearWeight down;              // [hidden, intermediate]
};

struct LlamaWeights {
  std::vector<float> embed;  // [vocab, hidden]
  LinearWeight lm_head;      // [vocab, hidden]; a copy of embed when tied
  std::vector<float> final_norm;
  std::vector<LlamaLayerWeights> layers;

  int64_t NumBytes() const;
};

// NOT_FOUND / INVALID_ARGUMENT when a tensor is missing or has the wrong shape.
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& config, const WeightStore& store,
                                              LinearDType dtype, kernels::ParallelFor& pool);

}  // namespace loom
