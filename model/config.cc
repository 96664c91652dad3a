#include "model/config.h"

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
  if (!c.rope_freq_factors.empty() &&
      c.rope_freq_factors.size() != static_cast<size_t>(c.head_dim / 2)) {
    return Invalid("rope_freqs has the wrong length");
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseConfig(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Invalid("config.json is not a JSON object");
  ModelConfig c;
  if (auto it = j.find("architectures");
      it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    c.architecture = (*it)[0].get<std::string>();
  }
  std::string model_type = String(j, "model_type", "");
  if (c.architecture.empty()) {
    if (model_type == "llama") c.architecture = "LlamaForCausalLM";
    if (model_type == "mistral") c.architecture = "MistralForCausalLM";
    if (model_type == "qwen2") c.architecture = "Qwen2ForCausalLM";
  }
  if (c.architecture != "LlamaForCausalLM" && c.architecture != "MistralForCausalLM" &&
      c.architecture != "Qwen2ForCausalLM") {
    return absl::UnimplementedError(absl::StrCat("unsupported architecture '", c.architecture,
                                                 "' (Llama, Mistral and Qwen2 are)"));
  }
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
  c.rope_theta = static_cast<float>(Number(j, "rope_theta").value_or(10000.0));
  LOOM_ASSIGN_OR_RETURN(c.max_position_embeddings, Int(j, "max_position_embeddings", 2048));
  c.tie_word_embeddings = Bool(j, "tie_word_embeddings", false);
  c.attention_bias = c.architecture == "Qwen2ForCausalLM" ||
                     (j.contains("attention_bias") && j["attention_bias"].is_boolean() &&
                      j["attention_bias"].get<bool>());
  if (auto it = j.find("eos_token_id"); it != j.end()) c.eos_token_ids = IdList(*it);
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer()) {
    c.bos_token_id = it->get<int32_t>();
  }
  // transformers 5 writes rope_parameters (theta included) instead of
  // rope_theta + rope_scaling.
  const json* rope = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) {
    rope = &*it;
    c.rope_theta = static_cast<float>(Number(*rope, "rope_theta").value_or(c.rope_theta));
  } else if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) {
    rope = &*it;
  }
  if (rope != nullptr) {
    const json& rs = *rope;
    std::string type = String(rs, "rope_type", String(rs, "type", "default"));
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
  }
  // Attention is always full: a sliding window (Mistral v0.1) is honoured by
  // never running past it.
  if (std::optional<double> window = Number(j, "sliding_window");
      window && *window > 0 && Bool(j, "use_sliding_window", true) &&
      *window < c.max_position_embeddings) {
    c.max_position_embeddings = static_cast<int32_t>(*window);
  }
  LOOM_RETURN_IF_ERROR(Validate(c));
  return c;
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
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported GGUF architecture '", arch, "' (llama and qwen2 are)"));
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

std::vector<float> RopeInverseFrequencies(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(half);
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
