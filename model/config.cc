#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numbers>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "formats/gguf_file.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model config: ", what));
}

// A present, non-null number; nullopt otherwise.
std::optional<double> Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Present values of the wrong type (null included) count as absent.
bool Bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string String(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// A whole number in [0, 2^31 - 1], or the fallback when the key is absent.
absl::StatusOr<int32_t> Int(const json& j, const char* key, int32_t fallback) {
  std::optional<double> v = Number(j, key);
  if (!v) return fallback;
  constexpr double kMax = std::numeric_limits<int32_t>::max();
  if (!(*v >= 0 && *v <= kMax) || *v != std::floor(*v)) {
    return Invalid(absl::StrCat(key, " must be a whole number in [0, 2147483647]; got ", *v));
  }
  return static_cast<int32_t>(*v);
}

std::vector<int32_t> IdList(const json& j) {
  std::vector<int32_t> ids;
  if (j.is_number_integer()) ids.push_back(j.get<int32_t>());
  if (j.is_array()) {
    for (const json& e : j) {
      if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
    }
  }
  return ids;
}

absl::Status Validate(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return Invalid("sizes must be positive");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Invalid(absl::StrCat("num_heads ", c.num_heads, " is not a multiple of num_kv_heads ",
                                c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) return Invalid("head_dim must be even");
  if (!(c.rms_norm_eps > 0) || !(c.rope_theta > 0) || !(c.rope_factor > 0)) {
    return Invalid("rms_norm_eps, rope_theta and rope factor must be positive");
  }
  if (c.max_position_embeddings <= 0) return Invalid("max_position_embeddings must be positive");
  if (c.sliding_window < 0 ||
      (c.sliding_window > 0 && c.layer_sliding.size() != static_cast<size_t>(c.num_layers))) {
    return Invalid(absl::StrCat("sliding_window must be >= 0 with one layer type per layer; got ",
                                c.sliding_window, " and ", c.layer_sliding.size(), " layer types"));
  }
  if (!(c.embedding_scale > 0) || !(c.attention_scale >= 0) || !(c.rope_local_theta >= 0)) {
    return Invalid("embedding scale, attention scale and rope_local_base_freq must be positive");
  }
  if (!c.rope_freq_factors.empty() &&
      c.rope_freq_factors.size() != static_cast<size_t>(c.head_dim / 2)) {
    return Invalid("rope_freqs has the wrong length");
  }
  return absl::OkStatus();
}

constexpr const char* kArchitectures[][2] = {
    {"llama", "LlamaForCausalLM"},        {"mistral", "MistralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},        {"qwen3", "Qwen3ForCausalLM"},
    {"gemma3_text", "Gemma3ForCausalLM"},
};

absl::Status ReadArchitecture(const json& j, ModelConfig& c) {
  if (auto it = j.find("architectures");
      it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    c.architecture = (*it)[0].get<std::string>();
  }
  const std::string model_type = String(j, "model_type", "");
  for (const auto& [type, arch] : kArchitectures) {
    if (c.architecture.empty() && model_type == type) c.architecture = arch;
  }
  for (const auto& [type, arch] : kArchitectures) {
    if (c.architecture == arch) return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("unsupported architecture '", c.architecture,
                                               "' (Llama, Mistral, Qwen2, Qwen3 and Gemma 3 are)"));
}

// rope_scaling / rope_parameters: the scaling of the full-attention layers.
absl::Status ReadRopeScaling(const json& rs, ModelConfig& c) {
  const std::string type = String(rs, "rope_type", String(rs, "type", "default"));
  if (type == "linear") {
    c.rope_scaling = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    c.rope_scaling = RopeScalingType::kLlama3;
  } else if (type != "default") {
    return absl::UnimplementedError(absl::StrCat("unsupported rope_scaling type '", type, "'"));
  }
  c.rope_factor = static_cast<float>(Number(rs, "factor").value_or(1.0));
  c.rope_low_freq_factor = static_cast<float>(Number(rs, "low_freq_factor").value_or(1.0));
  c.rope_high_freq_factor = static_cast<float>(Number(rs, "high_freq_factor").value_or(4.0));
  LOOM_ASSIGN_OR_RETURN(c.rope_original_max_position,
                        Int(rs, "original_max_position_embeddings", 8192));
  return absl::OkStatus();
}

absl::Status ReadRope(const json& j, ModelConfig& c) {
  c.rope_theta = static_cast<float>(Number(j, "rope_theta").value_or(c.rope_theta));
  if (c.architecture == "Gemma3ForCausalLM") {
    c.rope_local_theta = static_cast<float>(Number(j, "rope_local_base_freq").value_or(10000.0));
  }
  // transformers 5 writes rope_parameters (theta included) instead of
  // rope_theta + rope_scaling; Gemma 3's holds one entry per layer type.
  const json* rope = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) {
    rope = &*it;
    if (auto local = rope->find("sliding_attention"); local != rope->end() && local->is_object()) {
      c.rope_local_theta =
          static_cast<float>(Number(*local, "rope_theta").value_or(c.rope_local_theta));
    }
    if (auto full = rope->find("full_attention"); full != rope->end() && full->is_object()) {
      rope = &*full;
    }
    c.rope_theta = static_cast<float>(Number(*rope, "rope_theta").value_or(c.rope_theta));
  } else if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) {
    rope = &*it;
  }
  return rope != nullptr ? ReadRopeScaling(*rope, c) : absl::OkStatus();
}

// A window that no layer uses, or that covers every position, is no window.
void DropUnusedWindow(ModelConfig& c) {
  if (c.sliding_window >= c.max_position_embeddings ||
      std::find(c.layer_sliding.begin(), c.layer_sliding.end(), true) == c.layer_sliding.end()) {
    c.sliding_window = 0;
    c.layer_sliding.clear();
  }
}

// Which layers attend to a window: config.json's layer_types when present,
// else the architecture's rule (Gemma 3: all but every sixth layer; Mistral:
// all; Qwen: layers from max_window_layers on, with use_sliding_window).
absl::Status ReadSlidingWindow(const json& j, ModelConfig& c) {
  const std::optional<double> window = Number(j, "sliding_window");
  if (!window || *window <= 0) return absl::OkStatus();
  const bool qwen = c.architecture == "Qwen2ForCausalLM" || c.architecture == "Qwen3ForCausalLM";
  if (qwen && !Bool(j, "use_sliding_window", false)) return absl::OkStatus();
  if (*window > std::numeric_limits<int32_t>::max() || *window != std::floor(*window)) {
    return Invalid(absl::StrCat("sliding_window must be a whole number; got ", *window));
  }
  c.sliding_window = static_cast<int32_t>(*window);
  c.layer_sliding.assign(c.num_layers, c.architecture == "MistralForCausalLM");
  if (auto it = j.find("layer_types"); it != j.end() && it->is_array()) {
    if (it->size() != static_cast<size_t>(c.num_layers)) {
      return Invalid(
          absl::StrCat("layer_types has ", it->size(), " entries for ", c.num_layers, " layers"));
    }
    for (int32_t l = 0; l < c.num_layers; ++l) {
      const json& type = (*it)[l];
      if (!type.is_string() || (type != "sliding_attention" && type != "full_attention")) {
        return Invalid(
            absl::StrCat("layer_types[", l, "] must be sliding_attention or full_attention"));
      }
      c.layer_sliding[l] = type == "sliding_attention";
    }
  } else if (c.architecture == "Gemma3ForCausalLM") {
    LOOM_ASSIGN_OR_RETURN(const int32_t pattern, Int(j, "sliding_window_pattern", 6));
    for (int32_t l = 0; l < c.num_layers; ++l) {
      c.layer_sliding[l] = pattern == 0 || (l + 1) % pattern != 0;
    }
  } else if (qwen) {
    LOOM_ASSIGN_OR_RETURN(const int32_t first, Int(j, "max_window_layers", c.num_layers));
    for (int32_t l = first; l < c.num_layers; ++l) c.layer_sliding[l] = true;
  }
  DropUnusedWindow(c);
  return absl::OkStatus();
}

// What Gemma 3 adds to the Llama layout; softcapping and bidirectional
// attention (Gemma 2, Gemma 3's encoders) are refused by name.
absl::Status ReadGemma3(const json& j, ModelConfig& c) {
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.rms_norm_weight_offset = 1.0f;
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  LOOM_ASSIGN_OR_RETURN(const int32_t scalar, Int(j, "query_pre_attn_scalar", 256));
  if (scalar <= 0) return Invalid("query_pre_attn_scalar must be positive");
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (Number(j, key).has_value()) {
      return absl::UnimplementedError(absl::StrCat(key, " is not supported"));
    }
  }
  if (Bool(j, "use_bidirectional_attention", false)) {
    return absl::UnimplementedError("use_bidirectional_attention is not supported");
  }
  return absl::OkStatus();
}

absl::Status ReadActivation(const json& j, ModelConfig& c) {
  const std::string act =
      String(j, "hidden_activation",
             String(j, "hidden_act",
                    c.architecture == "Gemma3ForCausalLM" ? "gelu_pytorch_tanh" : "silu"));
  if (act == "silu") {
    c.hidden_activation = Activation::kSilu;
  } else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") {
    c.hidden_activation = Activation::kGeluTanh;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported hidden activation '", act, "' (silu, gelu_pytorch_tanh)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseConfig(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Invalid("config.json is not a JSON object");
  ModelConfig c;
  LOOM_RETURN_IF_ERROR(ReadArchitecture(j, c));
  const bool gemma = c.architecture == "Gemma3ForCausalLM";
  c.name = String(j, "_name_or_path", "");
  LOOM_ASSIGN_OR_RETURN(c.vocab_size, Int(j, "vocab_size", 0));
  LOOM_ASSIGN_OR_RETURN(c.hidden_size, Int(j, "hidden_size", 0));
  LOOM_ASSIGN_OR_RETURN(c.intermediate_size, Int(j, "intermediate_size", 0));
  LOOM_ASSIGN_OR_RETURN(c.num_layers, Int(j, "num_hidden_layers", 0));
  LOOM_ASSIGN_OR_RETURN(c.num_heads, Int(j, "num_attention_heads", 0));
  LOOM_ASSIGN_OR_RETURN(c.num_kv_heads, Int(j, "num_key_value_heads", c.num_heads));
  LOOM_ASSIGN_OR_RETURN(c.head_dim,
                        Int(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0));
  c.rms_norm_eps = static_cast<float>(Number(j, "rms_norm_eps").value_or(1e-6));
  LOOM_ASSIGN_OR_RETURN(c.max_position_embeddings, Int(j, "max_position_embeddings", 2048));
  // Gemma ties its embeddings unless told otherwise.
  c.tie_word_embeddings = Bool(j, "tie_word_embeddings", gemma);
  c.attention_bias = c.architecture == "Qwen2ForCausalLM" || Bool(j, "attention_bias", false);
  c.qk_norm = c.architecture == "Qwen3ForCausalLM";
  if (auto it = j.find("eos_token_id"); it != j.end()) c.eos_token_ids = IdList(*it);
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer()) {
    c.bos_token_id = it->get<int32_t>();
  }
  LOOM_RETURN_IF_ERROR(ReadRope(j, c));
  LOOM_RETURN_IF_ERROR(ReadActivation(j, c));
  if (gemma) LOOM_RETURN_IF_ERROR(ReadGemma3(j, c));
  LOOM_RETURN_IF_ERROR(ReadSlidingWindow(j, c));
  LOOM_RETURN_IF_ERROR(Validate(c));
  return c;
}

// llama.cpp's gemma3 keys leave out what it hard-codes and transformers takes
// as defaults: one full-attention layer in six, the sliding layers' RoPE base
// 10000, GELU, and query_pre_attn_scalar = head_dim (all Gemma 3 sizes but
// 27B, which llama.cpp treats apart).
void GemmaFromGguf(const GgufFile& gguf, ModelConfig& c) {
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.rms_norm_weight_offset = 1.0f;
  c.hidden_activation = Activation::kGeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.rope_local_theta = 10000.0f;
  const int64_t window = gguf.GetInt("gemma3.attention.sliding_window").value_or(0);
  if (window > 0 && window <= std::numeric_limits<int32_t>::max()) {
    c.sliding_window = static_cast<int32_t>(window);
    c.layer_sliding.resize(c.num_layers);
    for (int32_t l = 0; l < c.num_layers; ++l) c.layer_sliding[l] = (l + 1) % 6 != 0;
    DropUnusedWindow(c);
  }
}

}  // namespace

absl::StatusOr<ModelConfig> ConfigFromJsonString(const std::string& text) {
  // nlohmann::json throws on a field of the wrong type: a malformed file.
  try {
    return ParseConfig(text);
  } catch (const json::exception& e) {
    return Invalid(e.what());
  }
}

absl::StatusOr<ModelConfig> ConfigFromJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<ModelConfig> c = ConfigFromJsonString(ss.str());
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  return c;
}

absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  std::string arch = gguf.GetString("general.architecture").value_or("");
  if (arch == "llama") {
    c.architecture = "LlamaForCausalLM";
  } else if (arch == "qwen2") {
    c.architecture = "Qwen2ForCausalLM";
    c.attention_bias = true;
  } else if (arch == "qwen3") {
    c.architecture = "Qwen3ForCausalLM";
    c.qk_norm = true;
  } else if (arch == "gemma3") {
    c.architecture = "Gemma3ForCausalLM";
  } else {
    return absl::UnimplementedError(absl::StrCat("unsupported GGUF architecture '", arch,
                                                 "' (llama, qwen2, qwen3 and gemma3 are)"));
  }
  c.name = gguf.GetString("general.name").value_or("");
  auto get_int = [&](const char* key, int64_t fallback) {
    std::optional<int64_t> v = gguf.GetInt(absl::StrCat(arch, ".", key));
    return static_cast<int32_t>(
        std::clamp<int64_t>(v.value_or(fallback), 0, std::numeric_limits<int32_t>::max()));
  };
  c.hidden_size = get_int("embedding_length", 0);
  c.intermediate_size = get_int("feed_forward_length", 0);
  c.num_layers = get_int("block_count", 0);
  c.num_heads = get_int("attention.head_count", 0);
  c.num_kv_heads = get_int("attention.head_count_kv", c.num_heads);
  c.head_dim = get_int("attention.key_length", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position_embeddings = get_int("context_length", 2048);
  c.rms_norm_eps = static_cast<float>(
      gguf.GetFloat(absl::StrCat(arch, ".attention.layer_norm_rms_epsilon")).value_or(1e-5));
  c.rope_theta =
      static_cast<float>(gguf.GetFloat(absl::StrCat(arch, ".rope.freq_base")).value_or(10000.0));
  const GgufValue::Array* tokens = gguf.GetArray("tokenizer.ggml.tokens");
  c.vocab_size = get_int("vocab_size", tokens ? static_cast<int64_t>(tokens->size()) : 0);
  std::string scaling = gguf.GetString(absl::StrCat(arch, ".rope.scaling.type")).value_or("none");
  if (scaling == "linear") {
    c.rope_scaling = RopeScalingType::kLinear;
    c.rope_factor =
        static_cast<float>(gguf.GetFloat(absl::StrCat(arch, ".rope.scaling.factor")).value_or(1.0));
  } else if (scaling != "none") {
    return absl::UnimplementedError(absl::StrCat("unsupported rope scaling '", scaling, "'"));
  }
  if (const GgufTensorInfo* freqs = gguf.FindTensor("rope_freqs.weight")) {
    if (freqs->type != static_cast<uint32_t>(GgmlType::kF32) ||
        freqs->data.size() != static_cast<size_t>(c.head_dim / 2) * sizeof(float)) {
      return Invalid("rope_freqs.weight must hold head_dim / 2 float32 values");
    }
    c.rope_freq_factors.resize(c.head_dim / 2);
    std::memcpy(c.rope_freq_factors.data(), freqs->data.data(), freqs->data.size());
  }
  if (arch == "gemma3") GemmaFromGguf(gguf, c);
  c.tie_word_embeddings = gguf.FindTensor("output.weight") == nullptr;
  if (gguf.FindTensor("blk.0.attn_q.bias") != nullptr) c.attention_bias = true;
  if (auto bos = gguf.GetInt("tokenizer.ggml.bos_token_id")) c.bos_token_id = *bos;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (auto id = gguf.GetInt(key)) {
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end()) {
        c.eos_token_ids.push_back(static_cast<int32_t>(*id));
      }
    }
  }
  LOOM_RETURN_IF_ERROR(Validate(c));
  return c;
}

std::vector<std::pair<std::string, int32_t>> LayerNormWeights(const ModelConfig& c) {
  std::vector<std::pair<std::string, int32_t>> norms = {
      {"input_layernorm.weight", c.hidden_size},
      {"post_attention_layernorm.weight", c.hidden_size}};
  if (c.qk_norm) {
    norms.emplace_back("self_attn.q_norm.weight", c.head_dim);
    norms.emplace_back("self_attn.k_norm.weight", c.head_dim);
  }
  if (c.sandwich_norms) {
    norms.emplace_back("pre_feedforward_layernorm.weight", c.hidden_size);
    norms.emplace_back("post_feedforward_layernorm.weight", c.hidden_size);
  }
  return norms;
}

bool IsSlidingLayer(const ModelConfig& c, int32_t layer) {
  return c.sliding_window > 0 && c.layer_sliding[layer];
}

float AttentionScale(const ModelConfig& c) {
  return c.attention_scale > 0 ? c.attention_scale
                               : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
}

std::vector<float> RopeInverseFrequencies(const ModelConfig& c, bool sliding) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(half);
  if (sliding && c.rope_local_theta > 0) {
    for (int i = 0; i < half; ++i) {
      inv[i] = static_cast<float>(
          1.0 / std::pow(static_cast<double>(c.rope_local_theta), 2.0 * i / c.head_dim));
    }
    return inv;
  }
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
    if (!c.rope_freq_factors.empty()) f /= c.rope_freq_factors[i];
    if (c.rope_scaling == RopeScalingType::kLinear) f /= c.rope_factor;
    if (c.rope_scaling == RopeScalingType::kLlama3) {
      const double old_len = c.rope_original_max_position;
      const double low_wavelen = old_len / c.rope_low_freq_factor;
      const double high_wavelen = old_len / c.rope_high_freq_factor;
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= c.rope_factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_len / wavelen - c.rope_low_freq_factor) /
                              (c.rope_high_freq_factor - c.rope_low_freq_factor);
        f = (1 - smooth) * f / c.rope_factor + smooth * f;
      }
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

}  // namespace loom
