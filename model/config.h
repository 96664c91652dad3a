// The shape of a Llama-family model (Llama 2/3/3.x, Mistral, Qwen2, Qwen3,
// SmolLM, Gemma 3), read from a Hugging Face config.json or from GGUF
// metadata. Everything the executors need to size buffers and run RoPE lives
// here, including what sets Gemma 3 and Qwen3 apart from Llama.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

class GgufFile;

enum class RopeScalingType { kNone, kLinear, kLlama3 };

// The MLP's gate activation: SwiGLU (Llama) or GeGLU with tanh-approximated
// GELU (Gemma's gelu_pytorch_tanh).
enum class Activation { kSilu, kGeluTanh };

struct ModelConfig {
  // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
  // "Qwen3ForCausalLM", "Gemma3ForCausalLM"
  std::string architecture;
  std::string name;  // default served model name
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  // RoPE is always the Hugging Face half-split (NeoX) form: GGUF weights are
  // un-permuted at load so that both formats share it.
  RopeScalingType rope_scaling = RopeScalingType::kNone;
  float rope_factor = 1.0f;  // linear: positions divided by it; llama3: see below
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int32_t rope_original_max_position = 8192;
  // Per-frequency divisors from a GGUF rope_freqs.weight tensor (how llama.cpp
  // stores llama3 scaling); empty otherwise.
  std::vector<float> rope_freq_factors;
  int32_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;  // lm_head shares model.embed_tokens.weight
  bool attention_bias = false;       // q/k/v projections carry a bias (Qwen2)
  // An RMSNorm over each query and key head before RoPE (Qwen3, Gemma 3).
  bool qk_norm = false;
  // Gemma 3's four norms per layer: the attention output and the MLP output
  // are normed before their residual adds, and the MLP's input norm is
  // pre_feedforward_layernorm (post_attention_layernorm is Llama's).
  bool sandwich_norms = false;
  // Every RMSNorm scales by (weight + this): 1 for Gemma's (1 + w).
  float rms_norm_weight_offset = 0.0f;
  Activation hidden_activation = Activation::kSilu;
  float embedding_scale = 1.0f;  // embeddings are multiplied by it (Gemma: sqrt(hidden))
  // Attention logits are q.k times this; 0 means 1 / sqrt(head_dim). Gemma 3:
  // query_pre_attn_scalar^-1/2.
  float attention_scale = 0.0f;
  // Positions a sliding-window layer attends to, its own included: query p
  // sees (p - sliding_window, p]. 0: no layer slides.
  int32_t sliding_window = 0;
  std::vector<bool> layer_sliding;  // per layer when sliding_window > 0
  // RoPE base of the sliding layers (Gemma 3's rope_local_base_freq, unscaled);
  // 0: rope_theta with its scaling, as the full-attention layers.
  float rope_local_theta = 0.0f;
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id;
};

// Parses a Hugging Face config.json.
absl::StatusOr<ModelConfig> ConfigFromJson(const std::string& path);
absl::StatusOr<ModelConfig> ConfigFromJsonString(const std::string& json);

// Reads the llama.* (or qwen2.*) keys of a GGUF file; vocab_size falls back to
// the length of tokenizer.ggml.tokens.
absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf);

// The per-dimension inverse frequencies of RoPE after scaling (head_dim / 2
// values), so that every executor applies rope_scaling identically; for
// sliding layers with rope_local_theta, that base unscaled.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config, bool sliding = false);

// The norm weights of a decoder layer: names under "model.layers.<i>." and
// their lengths (input_layernorm, post_attention_layernorm, and Qwen3's and
// Gemma 3's q_norm / k_norm, Gemma 3's pre_ and post_feedforward_layernorm).
std::vector<std::pair<std::string, int32_t>> LayerNormWeights(const ModelConfig& config);

// Whether layer `layer` attends to a sliding window only.
bool IsSlidingLayer(const ModelConfig& config, int32_t layer);
// The attention logit scale.
float AttentionScale(const ModelConfig& config);

}  // namespace loom
