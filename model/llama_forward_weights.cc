#include "model/llama_forward_weights.h"

#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace loom {
namespace {

absl::StatusOr<const Tensor*> Checked(const WeightStore& store, const std::string& name,
                                      int64_t rows, int64_t cols) {
  absl::StatusOr<const Tensor*> t = store.Get(name);
  if (!t.ok()) return t.status();
  if ((*t)->rows() != rows || (*t)->cols() != cols) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has shape [",
                                                   absl::StrJoin((*t)->shape, ", "), "], want [",
                                                   rows, ", ", cols, "]"));
  }
  return t;
}

// Appends tensor `name` (checked to be rows x cols) to out, converted in
// parallel over rows.
template <typename T>
absl::Status AppendRows(const WeightStore& store, const std::string& name, int64_t rows,
                        int64_t cols, kernels::ParallelFor& pool, std::vector<T>& out) {
  absl::StatusOr<const Tensor*> t = Checked(store, name, rows, cols);
  if (!t.ok()) return t.status();
  const size_t base = out.size();
  out.resize(base + rows * cols);
  std::span<T> dst(out.data() + base, rows * cols);
  pool.Run(rows, 64, [&](int64_t begin, int64_t end) {
    std::span<T> part = dst.subspan(begin * cols, (end - begin) * cols);
    if constexpr (std::is_same_v<T, float>) {
      store.RowsToFloat32(**t, begin, end, part);
    } else {
      store.RowsToBFloat16(**t, begin, end, part);
    }
  });
  return absl::OkStatus();
}

absl::Status Vector(const WeightStore& store, const std::string& name, int64_t n,
                    kernels::ParallelFor& pool, std::vector<float>& out) {
  return AppendRows(store, name, 1, n, pool, out);
}

// One part of a (possibly fused) linear weight: a tensor of `rows` rows.
struct Part {
  std::string name;
  int64_t rows;
};

// The block types of the parts, runs of one type merged, when every part is
// stored in ggml blocks; nullopt otherwise.
std::optional<std::vector<QuantRows>> QuantizedParts(const WeightStore& store,
                                                     const std::vector<Part>& parts) {
  std::vector<QuantRows> out;
  for (const Part& part : parts) {
    const Tensor* t = store.Find(part.name);
    if (t == nullptr) return std::nullopt;  // reported by the conversion
    const std::optional<kernels::cpu::QuantType> type = QuantTypeOf(t->dtype);
    if (!type.has_value()) return std::nullopt;
    if (!out.empty() && out.back().type == *type) {
      out.back().rows += static_cast<int32_t>(part.rows);
    } else {
      out.push_back({*type, static_cast<int32_t>(part.rows)});
    }
  }
  return out;
}

// Appends tensor `name`'s blocks (checked to be rows x cols) to out.
absl::Status AppendBlocks(const WeightStore& store, const std::string& name, int64_t rows,
                          int64_t cols, std::vector<std::byte>& out) {
  absl::StatusOr<const Tensor*> t = Checked(store, name, rows, cols);
  if (!t.ok()) return t.status();
  out.insert(out.end(), (*t)->data.begin(), (*t)->data.end());
  return absl::OkStatus();
}

// The linear weight [sum of parts' rows, k], its parts stacked in order.
absl::StatusOr<LinearWeight> Linear(const WeightStore& store, const std::vector<Part>& parts,
                                    int64_t k, LinearDType dtype, bool keep_quantized,
                                    kernels::ParallelFor& pool) {
  LinearWeight w;
  w.dtype = dtype;
  w.k = static_cast<int32_t>(k);
  if (keep_quantized) {
    if (std::optional<std::vector<QuantRows>> q = QuantizedParts(store, parts)) {
      w.dtype = LinearDType::kQuantized;
      w.parts = *std::move(q);
    }
  }
  absl::Status s;
  for (const Part& part : parts) {
    w.n += static_cast<int32_t>(part.rows);
    switch (w.dtype) {
      case LinearDType::kFloat32:
        s.Update(AppendRows(store, part.name, part.rows, k, pool, w.f32));
        break;
      case LinearDType::kBFloat16:
        s.Update(AppendRows(store, part.name, part.rows, k, pool, w.bf16));
        break;
      case LinearDType::kQuantized:
        s.Update(AppendBlocks(store, part.name, part.rows, k, w.quant));
        break;
    }
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace

const char* LinearDTypeName(LinearDType dtype) {
  switch (dtype) {
    case LinearDType::kFloat32:
      return "float32";
    case LinearDType::kBFloat16:
      return "bfloat16";
    case LinearDType::kQuantized:
      break;
  }
  return "quantized";
}

int64_t LinearWeight::NumBytes() const {
  return static_cast<int64_t>(f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t) +
                              quant.size() + bias.size() * sizeof(float));
}

int64_t LlamaWeights::NumBytes() const {
  int64_t n = embed.NumBytes() + lm_head.NumBytes() + final_norm.size() * sizeof(float);
  for (const LlamaLayerWeights& l : layers) {
    const size_t norms = l.input_norm.size() + l.q_norm.size() + l.k_norm.size() +
                         l.post_attn_norm.size() + l.mlp_norm.size() + l.post_mlp_norm.size();
    n += norms * sizeof(float) + l.qkv.NumBytes() + l.o_proj.NumBytes() + l.gate_up.NumBytes() +
         l.down.NumBytes();
  }
  return n;
}

namespace {

// The conversions of one load, with the options they share.
struct WeightLoader {
  const ModelConfig& c;
  const WeightStore& store;
  LinearDType dtype;
  bool keep_quantized;
  kernels::ParallelFor& pool;

  absl::Status LoadLinear(const std::vector<Part>& parts, int64_t k, LinearWeight& out,
                          LinearDType as) const {
    absl::StatusOr<LinearWeight> w = Linear(store, parts, k, as, keep_quantized, pool);
    if (!w.ok()) return w.status();
    out = *std::move(w);
    return absl::OkStatus();
  }
  absl::Status LoadLinear(const std::vector<Part>& parts, int64_t k, LinearWeight& out) const {
    return LoadLinear(parts, k, out, dtype);
  }

  // A norm's weight with the config's offset added (Gemma's 1 + w, in float32
  // as transformers computes it).
  absl::Status Norm(const std::string& name, int64_t n, std::vector<float>& out) const {
    absl::Status s = Vector(store, name, n, pool, out);
    if (c.rms_norm_weight_offset != 0.0f) {
      for (float& w : out) w = c.rms_norm_weight_offset + w;
    }
    return s;
  }

  absl::Status Layer(const std::string& p, LlamaLayerWeights& l) const {
    const int64_t hidden = c.hidden_size;
    const int64_t q_rows = static_cast<int64_t>(c.num_heads) * c.head_dim;
    const int64_t kv_rows = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
    absl::Status s = Norm(p + "input_layernorm.weight", hidden, l.input_norm);
    s.Update(LoadLinear({{p + "self_attn.q_proj.weight", q_rows},
                         {p + "self_attn.k_proj.weight", kv_rows},
                         {p + "self_attn.v_proj.weight", kv_rows}},
                        hidden, l.qkv));
    if (c.attention_bias) {
      s.Update(Vector(store, p + "self_attn.q_proj.bias", q_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.k_proj.bias", kv_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.v_proj.bias", kv_rows, pool, l.qkv.bias));
    }
    if (c.qk_norm) {
      s.Update(Norm(p + "self_attn.q_norm.weight", c.head_dim, l.q_norm));
      s.Update(Norm(p + "self_attn.k_norm.weight", c.head_dim, l.k_norm));
    }
    s.Update(LoadLinear({{p + "self_attn.o_proj.weight", hidden}}, q_rows, l.o_proj));
    if (c.sandwich_norms) {
      s.Update(Norm(p + "post_attention_layernorm.weight", hidden, l.post_attn_norm));
      s.Update(Norm(p + "pre_feedforward_layernorm.weight", hidden, l.mlp_norm));
      s.Update(Norm(p + "post_feedforward_layernorm.weight", hidden, l.post_mlp_norm));
    } else {
      s.Update(Norm(p + "post_attention_layernorm.weight", hidden, l.mlp_norm));
    }
    s.Update(LoadLinear({{p + "mlp.gate_proj.weight", c.intermediate_size},
                         {p + "mlp.up_proj.weight", c.intermediate_size}},
                        hidden, l.gate_up));
    s.Update(LoadLinear({{p + "mlp.down_proj.weight", hidden}}, c.intermediate_size, l.down));
    return s;
  }
};

}  // namespace

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& c, const WeightStore& store,
                                              LinearDType dtype, kernels::ParallelFor& pool,
                                              bool keep_quantized) {
  LOOM_CHECK(dtype == LinearDType::kFloat32 || dtype == LinearDType::kBFloat16);
  const WeightLoader load{c, store, dtype, keep_quantized, pool};
  const int64_t hidden = c.hidden_size;
  LlamaWeights w;
  // The table is float32 unless it keeps its blocks: a step looks up a few rows.
  absl::Status s = load.LoadLinear({{"model.embed_tokens.weight", c.vocab_size}}, hidden, w.embed,
                                   LinearDType::kFloat32);
  // A tied head in blocks is the table itself.
  if (!c.tie_word_embeddings || w.embed.dtype != LinearDType::kQuantized) {
    s.Update(load.LoadLinear(
        {{c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab_size}},
        hidden, w.lm_head));
  }
  s.Update(load.Norm("model.norm.weight", hidden, w.final_norm));
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers && s.ok(); ++i) {
    s.Update(load.Layer(absl::StrCat("model.layers.", i, "."), w.layers[i]));
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace loom
