#include "model/gguf_weights.h"

#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace loom {
namespace {

// ggml's names of its tensor types, by id (ids 4 and 5 are retired).
std::string GgmlTypeName(uint32_t type) {
  static constexpr const char* kNames[] = {
      "F32",      "F16",      "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
      "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
      "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
      "I8",       "I16",      "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0"};
  if (type < std::size(kNames)) return kNames[type];
  return absl::StrCat("unknown type ", type);
}

absl::StatusOr<DType> ToDType(const GgufTensorInfo& info) {
  static constexpr std::pair<GgmlType, DType> kTypes[] = {
      {GgmlType::kF32, DType::kF32},   {GgmlType::kF16, DType::kF16},
      {GgmlType::kBF16, DType::kBF16}, {GgmlType::kQ8_0, DType::kQ8_0},
      {GgmlType::kQ4_0, DType::kQ4_0}, {GgmlType::kQ4_1, DType::kQ4_1},
      {GgmlType::kQ5_0, DType::kQ5_0}, {GgmlType::kQ5_1, DType::kQ5_1},
      {GgmlType::kQ2_K, DType::kQ2_K}, {GgmlType::kQ3_K, DType::kQ3_K},
      {GgmlType::kQ4_K, DType::kQ4_K}, {GgmlType::kQ5_K, DType::kQ5_K},
      {GgmlType::kQ6_K, DType::kQ6_K},
  };
  std::string supported;
  for (const auto& [ggml, dtype] : kTypes) {
    if (static_cast<uint32_t>(ggml) == info.type) return dtype;
    absl::StrAppend(&supported, supported.empty() ? "" : ", ",
                    GgmlTypeName(static_cast<uint32_t>(ggml)));
  }
  return absl::UnimplementedError(absl::StrCat("tensor ", info.name, " has ggml type ",
                                               GgmlTypeName(info.type),
                                               "; supported: ", supported));
}

// GGUF name -> Hugging Face name; empty for tensors that are not weights.
// Gemma's ffn_norm is the MLP's input norm, which Gemma calls
// pre_feedforward_layernorm (Llama's post_attention_layernorm).
std::string HfName(const std::string& gguf_name, bool gemma) {
  static const std::pair<const char*, const char*> kTop[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  for (const auto& [from, to] : kTop) {
    if (gguf_name == from) return to;
  }
  if (gguf_name == "rope_freqs.weight") return "";  // consumed by ConfigFromGguf
  static const std::pair<const char*, const char*> kLayer[] = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"post_ffw_norm", "post_feedforward_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  std::vector<std::string> parts = absl::StrSplit(gguf_name, '.');
  int layer;
  if (parts.size() == 4 && parts[0] == "blk" && absl::SimpleAtoi(parts[1], &layer)) {
    if (parts[2] == "ffn_norm") {
      return absl::StrCat("model.layers.", layer, ".",
                          gemma ? "pre_feedforward_layernorm." : "post_attention_layernorm.",
                          parts[3]);
    }
    for (const auto& [from, to] : kLayer) {
      if (parts[2] == from) return absl::StrCat("model.layers.", layer, ".", to, ".", parts[3]);
    }
  }
  return gguf_name;
}

// llama.cpp's converter stores Gemma's norm weights as 1 + w; the store keeps
// Hugging Face's w (the config's rms_norm_weight_offset adds the 1 back), as
// transformers does: w = stored - 1, in float32.
absl::Status UndoNormOffset(const GgufTensorInfo& info, Tensor& t, WeightStore& store) {
  if (t.dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", info.name, ": gemma3 norm weights must be F32"));
  }
  std::span<std::byte> buf = store.Allocate(info.data.size());
  for (size_t i = 0; i < info.data.size(); i += sizeof(float)) {
    float w;
    std::memcpy(&w, info.data.data() + i, sizeof(w));
    w -= 1.0f;
    std::memcpy(buf.data() + i, &w, sizeof(w));
  }
  t.data = buf;
  return absl::OkStatus();
}

bool IsPermutedByConverter(const std::string& gguf_name) {
  return gguf_name.find(".attn_q.") != std::string::npos ||
         gguf_name.find(".attn_k.") != std::string::npos;
}

}  // namespace

int64_t GgufRowToHfRow(int64_t row, int32_t head_dim) {
  const int64_t head = row / head_dim, within = row % head_dim;
  return head * head_dim + (within % 2) * (head_dim / 2) + within / 2;
}

absl::StatusOr<std::unique_ptr<WeightStore>> LoadGgufWeights(const GgufFile& gguf,
                                                             const ModelConfig& config) {
  auto store = std::make_unique<WeightStore>();
  store->KeepAlive(gguf.mapping());
  // llama.cpp's converter interleaves Q/K rows for the llama architecture only;
  // qwen2 keeps Hugging Face's order.
  const bool unpermute = config.architecture == "LlamaForCausalLM";
  const bool gemma = config.architecture == "Gemma3ForCausalLM";
  for (const GgufTensorInfo& info : gguf.tensors()) {
    std::string name = HfName(info.name, gemma);
    if (name.empty()) continue;
    Tensor t;
    t.name = name;
    LOOM_ASSIGN_OR_RETURN(t.dtype, ToDType(info));
    t.shape.assign(info.ne.rbegin(), info.ne.rend());
    t.data = info.data;
    if (gemma && absl::EndsWith(info.name, "norm.weight")) {
      LOOM_RETURN_IF_ERROR(UndoNormOffset(info, t, *store));
    }
    if (unpermute && IsPermutedByConverter(info.name)) {
      const int64_t rows = t.rows();
      if (rows % config.head_dim != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", info.name, " rows are not whole heads"));
      }
      const int64_t row_bytes = static_cast<int64_t>(info.data.size()) / rows;
      std::span<std::byte> buf = store->Allocate(info.data.size());
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(buf.data() + GgufRowToHfRow(r, config.head_dim) * row_bytes,
                    info.data.data() + r * row_bytes, row_bytes);
      }
      t.data = buf;
    }
    LOOM_RETURN_IF_ERROR(store->Add(std::move(t)));
  }
  return store;
}

}  // namespace loom
