#include "model/llama_forward_weights.h"

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// Appends tensor `name` to the rows of w (rows x w.k).
absl::Status AppendLinear(const WeightStore& store, const std::string& name, int64_t rows,
                          kernels::ParallelFor& pool, LinearWeight& w) {
  w.n += static_cast<int32_t>(rows);
  return w.dtype == LinearDType::kFloat32 ? AppendRows(store, name, rows, w.k, pool, w.f32)
                                          : AppendRows(store, name, rows, w.k, pool, w.bf16);
}

LinearWeight Empty(LinearDType dtype, int64_t k) {
  LinearWeight w;
  w.dtype = dtype;
  w.k = static_cast<int32_t>(k);
  return w;
}

}  // namespace

int64_t LinearWeight::NumBytes() const {
  return static_cast<int64_t>(f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t) +
                              bias.size() * sizeof(float));
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
                                              LinearDType dtype, kernels::ParallelFor& pool) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  LlamaWeights w;
  w.lm_head = Empty(dtype, hidden);
  absl::Status s =
      AppendRows(store, "model.embed_tokens.weight", c.vocab_size, hidden, pool, w.embed);
  s.Update(AppendLinear(store,
                        c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                        c.vocab_size, pool, w.lm_head));
  s.Update(Vector(store, "model.norm.weight", hidden, pool, w.final_norm));
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers && s.ok(); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LlamaLayerWeights& l = w.layers[i];
    l.qkv = Empty(dtype, hidden);
    l.o_proj = Empty(dtype, q_rows);
    l.gate_up = Empty(dtype, hidden);
    l.down = Empty(dtype, c.intermediate_size);
    s.Update(Vector(store, p + "input_layernorm.weight", hidden, pool, l.input_norm));
    s.Update(AppendLinear(store, p + "self_attn.q_proj.weight", q_rows, pool, l.qkv));
    s.Update(AppendLinear(store, p + "self_attn.k_proj.weight", kv_rows, pool, l.qkv));
    s.Update(AppendLinear(store, p + "self_attn.v_proj.weight", kv_rows, pool, l.qkv));
    if (c.attention_bias) {
      s.Update(Vector(store, p + "self_attn.q_proj.bias", q_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.k_proj.bias", kv_rows, pool, l.qkv.bias));
      s.Update(Vector(store, p + "self_attn.v_proj.bias", kv_rows, pool, l.qkv.bias));
    }
    s.Update(AppendLinear(store, p + "self_attn.o_proj.weight", hidden, pool, l.o_proj));
    s.Update(Vector(store, p + "post_attention_layernorm.weight", hidden, pool, l.post_norm));
    s.Update(AppendLinear(store, p + "mlp.gate_proj.weight", c.intermediate_size, pool, l.gate_up));
    s.Update(AppendLinear(store, p + "mlp.up_proj.weight", c.intermediate_size, pool, l.gate_up));
    s.Update(AppendLinear(store, p + "mlp.down_proj.weight", hidden, pool, l.down));
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace loom
