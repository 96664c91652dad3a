#include "model/dummy_weights.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace loom {
namespace {

// splitmix64: fast, deterministic and good enough for placeholder weights.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Uniform in [-1, 1).
  float Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }

 private:
  uint64_t state_;
};

void AddTensor(WeightStore& store, DType dtype, const std::string& name, std::vector<int64_t> shape,
               float scale, float offset, Rng& rng) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t n = t.num_elements();
  std::span<std::byte> buf = store.Allocate(n * DTypeBlockBytes(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float v = offset + scale * rng.Next();
    if (dtype == DType::kF32) {
      std::memcpy(buf.data() + 4 * i, &v, 4);
    } else {
      const uint16_t b = FloatToBFloat16(v);
      std::memcpy(buf.data() + 2 * i, &b, 2);
    }
  }
  t.data = buf;
  absl::Status s = store.Add(std::move(t));
  LOOM_CHECK(s.ok()) << s;
}

}  // namespace

std::unique_ptr<WeightStore> MakeDummyWeights(const ModelConfig& c, DType dtype, uint64_t seed) {
  LOOM_CHECK(dtype == DType::kF32 || dtype == DType::kBF16) << DTypeName(dtype);
  auto store = std::make_unique<WeightStore>();
  Rng rng(seed);
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, f = c.intermediate_size;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    AddTensor(*store, dtype, name, {out, in}, 1.0f / std::sqrt(static_cast<float>(in)), 0, rng);
  };
  // Unit norms, whatever offset the model adds to their weights.
  auto norm = [&](const std::string& name, int64_t n) {
    AddTensor(*store, dtype, name, {n}, 0, 1.0f - c.rms_norm_weight_offset, rng);
  };
  AddTensor(*store, dtype, "model.embed_tokens.weight", {c.vocab_size, h}, 1.0f, 0, rng);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    for (const auto& [name, size] : LayerNormWeights(c)) norm(p + name, size);
    linear(p + "self_attn.q_proj.weight", q, h);
    linear(p + "self_attn.k_proj.weight", kv, h);
    linear(p + "self_attn.v_proj.weight", kv, h);
    linear(p + "self_attn.o_proj.weight", h, q);
    if (c.attention_bias) {
      AddTensor(*store, dtype, p + "self_attn.q_proj.bias", {q}, 0.02f, 0, rng);
      AddTensor(*store, dtype, p + "self_attn.k_proj.bias", {kv}, 0.02f, 0, rng);
      AddTensor(*store, dtype, p + "self_attn.v_proj.bias", {kv}, 0.02f, 0, rng);
    }
    linear(p + "mlp.gate_proj.weight", f, h);
    linear(p + "mlp.up_proj.weight", f, h);
    linear(p + "mlp.down_proj.weight", h, f);
  }
  norm("model.norm.weight", h);
  if (!c.tie_word_embeddings) linear("lm_head.weight", c.vocab_size, h);
  return store;
}

}  // namespace loom
