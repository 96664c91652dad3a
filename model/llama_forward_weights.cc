#include "model/llama_forward_weights.h"

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom {
namespace {

// Appends tensor `name` (checked to be `rows` x `cols`) to out, converted to
// float32 in parallel over rows.
absl::Status AppendRows(const WeightStore& store, const std::string& name, int64_t rows,
                        int64_t cols, kernels::ParallelFor& pool, std::vector<float>& out) {
  absl::StatusOr<const Tensor*> t = store.Get(name);
  if (!t.ok()) return t.status();
  if ((*t)->rows() != rows || (*t)->cols() != cols) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has shape [",
                                                   absl::StrJoin((*t)->shape, ", "), "], want [",
                                                   rows, ", ", cols, "]"));
  }
  const size_t base = out.size();
  out.resize(base + rows * cols);
  std::span<float> dst(out.data() + base, rows * cols);
  pool.Run(rows, 64, [&](int64_t begin, int64_t end) {
    store.RowsToFloat32(**t, begin, end, dst.subspan(begin * cols, (end - begin) * cols));
  });
  return absl::OkStatus();
}

absl::Status Vector(const WeightStore& store, const std::string& name, int64_t n,
                    kernels::ParallelFor& pool, std::vector<float>& out) {
  return AppendRows(store, name, 1, n, pool, out);
}

}  // namespace

int64_t LlamaWeights::NumBytes() const {
  int64_t n = embed.size() + lm_head.size() + final_norm.size();
  for (const LlamaLayerWeights& l : layers) {
    n += l.input_norm.size() + l.qkv.size() + l.qkv_bias.size() + l.o_proj.size() +
         l.post_norm.size() + l.gate_up.size() + l.down.size();
  }
  return n * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelConfig& c, const WeightStore& store,
                                              kernels::ParallelFor& pool) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  LlamaWeights w;
  absl::Status s =
      AppendRows(store, "model.embed_tokens.weight", c.vocab_size, hidden, pool, w.embed);
  if (s.ok() && !c.tie_word_embeddings) {
    s = AppendRows(store, "lm_head.weight", c.vocab_size, hidden, pool, w.lm_head);
  }
  if (s.ok()) s = Vector(store, "model.norm.weight", hidden, pool, w.final_norm);
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers && s.ok(); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LlamaLayerWeights& l = w.layers[i];
    s.Update(Vector(store, p + "input_layernorm.weight", hidden, pool, l.input_norm));
    s.Update(AppendRows(store, p + "self_attn.q_proj.weight", q_rows, hidden, pool, l.qkv));
    s.Update(AppendRows(store, p + "self_attn.k_proj.weight", kv_rows, hidden, pool, l.qkv));
    s.Update(AppendRows(store, p + "self_attn.v_proj.weight", kv_rows, hidden, pool, l.qkv));
    if (c.attention_bias) {
      s.Update(Vector(store, p + "self_attn.q_proj.bias", q_rows, pool, l.qkv_bias));
      s.Update(Vector(store, p + "self_attn.k_proj.bias", kv_rows, pool, l.qkv_bias));
      s.Update(Vector(store, p + "self_attn.v_proj.bias", kv_rows, pool, l.qkv_bias));
    }
    s.Update(AppendRows(store, p + "self_attn.o_proj.weight", hidden, q_rows, pool, l.o_proj));
    s.Update(Vector(store, p + "post_attention_layernorm.weight", hidden, pool, l.post_norm));
    s.Update(AppendRows(store, p + "mlp.gate_proj.weight", c.intermediate_size, hidden, pool,
                        l.gate_up));
    s.Update(
        AppendRows(store, p + "mlp.up_proj.weight", c.intermediate_size, hidden, pool, l.gate_up));
    s.Update(
        AppendRows(store, p + "mlp.down_proj.weight", hidden, c.intermediate_size, pool, l.down));
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace loom
