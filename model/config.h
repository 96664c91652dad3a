// The shape of a Llama-family model (Llama 2/3/3.x, Mistral, Qwen2, SmolLM),
// read from a Hugging Face config.json or from GGUF metadata. Everything the
// executors need to size buffers and run RoPE lives here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

class GgufFile;

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct ModelConfig {
  std::string architecture;  // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"
  std::string name;          // default served model name
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
// values), so that every executor applies rope_scaling identically.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

}  // namespace loom
