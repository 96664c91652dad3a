// The CPU forward pass's copy of a Llama-family model's weights: linear layers
// converted at load from any WeightStore dtype to float32 or bfloat16, or kept
// in their ggml blocks when asked (the embedding table too, its rows decoded as
// tokens look them up); norms float32, with the config's weight offset
// (Gemma's 1 + w) added. q/k/v and gate/up are fused into one matrix each so
// that a layer runs two input GEMMs instead of five.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/parallel.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

enum class LinearDType { kFloat32, kBFloat16, kQuantized };

const char* LinearDTypeName(LinearDType dtype);

// Rows of a quantized linear weight in one ggml block type.
struct QuantRows {
  kernels::cpu::QuantType type = kernels::cpu::QuantType::kQ8_0;
  int32_t rows = 0;
};

// A linear layer's weight [n, k] (rows = output features), in one of these forms.
struct LinearWeight {
  LinearDType dtype = LinearDType::kFloat32;
  int32_t n = 0;
  int32_t k = 0;
  std::vector<float> f32;      // [n, k] when kFloat32
  std::vector<uint16_t> bf16;  // [n, k] when kBFloat16
  // When kQuantized: ggml blocks, row after row, in runs of rows of one block
  // type (a fused weight's parts may differ: Q4_K_M files mix types).
  std::vector<std::byte> quant;
  std::vector<QuantRows> parts;
  std::vector<float> bias;  // [n], or empty

  int64_t NumBytes() const;
};

struct LlamaLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  LinearWeight qkv;               // [(heads + 2 * kv_heads) * head_dim, hidden]
  std::vector<float> q_norm;      // [head_dim] with ModelConfig::qk_norm, else empty
  std::vector<float> k_norm;      // [head_dim] with ModelConfig::qk_norm, else empty
  LinearWeight o_proj;            // [hidden, heads * head_dim]
  // [hidden] with ModelConfig::sandwich_norms (on the attention output), else empty.
  std::vector<float> post_attn_norm;
  std::vector<float> mlp_norm;  // [hidden]: the MLP's input norm
  LinearWeight gate_up;         // [2 * intermediate, hidden]: gate rows, then up rows
  LinearWeight down;            // [hidden, intermediate]
  // [hidden] with ModelConfig::sandwich_norms (on the MLP output), else empty.
  std::vector<float> post_mlp_norm;
};

struct LlamaWeights {
  // [vocab, hidden]: float32, or the file's blocks when linear weights keep theirs.
  LinearWeight embed;
  // [vocab, hidden]; with tied embeddings in blocks it is embed itself and
  // stays empty (n == 0): head() is the one to multiply by.
  LinearWeight lm_head;
  std::vector<float> final_norm;
  std::vector<LlamaLayerWeights> layers;

  const LinearWeight& head() const { return lm_head.n > 0 ? lm_head : embed; }
  int64_t NumBytes() const;
};

// Linear weights in `dtype` (kFloat32 or kBFloat16). With keep_quantized, a
// linear weight whose parts (of a fused one) are all stored in ggml blocks
// keeps its blocks instead: decode on the CPU is bound by weight bytes, and
// the quantized matmul gives the bits of float32 on the dequantized weights.
// NOT_FOUND / INVALID_ARGUMENT when a tensor is missing or has the wrong shape.
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& config, const WeightStore& store,
                                              LinearDType dtype, kernels::ParallelFor& pool,
                                              bool keep_quantized = false);

}  // namespace loom
