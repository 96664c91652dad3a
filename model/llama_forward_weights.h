// The CPU forward pass's copy of a Llama-family model's weights: float32,
// with q/k/v and gate/up fused into one matrix each so that a layer runs two
// input GEMMs instead of five. Converted from any WeightStore dtype at load.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/parallel.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

struct LlamaLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> qkv;         // [(heads + 2 * kv_heads) * head_dim, hidden]
  std::vector<float> qkv_bias;    // same rows, or empty without attention_bias
  std::vector<float> o_proj;      // [hidden, heads * head_dim]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_up;     // [2 * intermediate, hidden]: gate rows, then up rows
  std::vector<float> down;        // [hidden, intermediate]
};

struct LlamaWeights {
  std::vector<float> embed;    // [vocab, hidden]
  std::vector<float> lm_head;  // [vocab, hidden]; empty when tied to embed
  std::vector<float> final_norm;
  std::vector<LlamaLayerWeights> layers;

  const float* LmHead() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
  int64_t NumBytes() const;
};

// NOT_FOUND / INVALID_ARGUMENT when a tensor is missing or has the wrong shape.
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& config, const WeightStore& store,
                                              kernels::ParallelFor& pool);

}  // namespace loom
