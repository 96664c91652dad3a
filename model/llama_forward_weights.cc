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
  int64_t n = (embed.size() + final_norm.size()) * sizeof(float) + lm_head.NumBytes();
  for (const LlamaLayerWeights& l : layers) {
    n += (l.input_norm.size() + l.post_norm.size()) * sizeof(float) + l.qkv.NumBytes() +
         l.o_proj.NumBytes() + l.gate_up.NumBytes() + l.down.NumBytes();
  }
  return n;
}

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& c, const WeightStore& store,
                                              LinearDType dtype, kernels::ParallelFor& pool,
                                              bool keep_quantized) {
  LOOM_CHECK(dtype == LinearDType::kFloat32 || dtype == LinearDType::kBFloat16);
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  auto linear = [&](const std::vector<Part>& parts, int64_t k, LinearWeight& out) {
    absl::StatusOr<LinearWeight> w = Linear(store, parts, k, dtype, keep_quantized, pool);
    if (!w.ok()) return w.status();
    out = *std::move(w);
    return absl::OkStatus();
  };
  LlamaWeights w;
  absl::Status s =
      AppendRows(store, "model.embed_tokens.weight", c.vocab_size, hidden, pool, w.embed);
  s.Update(linear(
      {{c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab_size}},
      hidden, w.lm_head));
  s.Update(Vector(store, "model.norm.weight", hidden, pool, w.final_norm));
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers && s.ok(); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LlamaLayerWeights& l = w.layers[i];
    s.Update(Vector(store, p + "input_layernorm.weight", hidden, pool, l.input_norm));
    s.Update(linear({{p + "self_attn.q_proj.weight", q_rows},
                     {p + "self_attn.k_proj.weight", kv_rows},
                     {p + "self_attn.v_proj.weight", kv_rows}},
                    hidden, l.qkv));
    if (c.attention_bias) {
      s.Update(Vector(store, p + "self_attn.q_proj.bias", q_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.k_proj.bias", kv_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.v_proj.bias", kv_rows, pool, l.qkv.bias));
    }
    s.Update(linear({{p + "self_attn.o_proj.weight", hidden}}, q_rows, l.o_proj));
    s.Update(Vector(store, p + "post_attention_layernorm.weight", hidden, pool, l.post_norm));
    s.Update(linear({{p + "mlp.gate_proj.weight", c.intermediate_size},
                     {p + "mlp.up_proj.weight", c.intermediate_size}},
                    hidden, l.gate_up));
    s.Update(linear({{p + "mlp.down_proj.weight", hidden}}, c.intermediate_size, l.down));
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace loom
