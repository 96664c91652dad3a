#include "model/cuda_weights.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/float16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/random_fill.h"

namespace loom {
namespace {

constexpr int64_t kAlign = 256;  // elements; keeps every matrix 512-byte aligned

struct Shape {
  int64_t rows, cols;
  int64_t size() const { return rows * cols; }
};

// Rows of the fused matrices.
int64_t QkvRows(const ModelConfig& c) {
  return static_cast<int64_t>(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
}

absl::Status CopyTensor(const WeightStore& store, const std::string& name, Shape shape,
                        __nv_bfloat16* dst, uint16_t* staging, int64_t staging_elems) {
  absl::StatusOr<const Tensor*> t = store.Get(name);
  if (!t.ok()) return t.status();
  const Tensor& tensor = **t;
  if (tensor.rows() != shape.rows || tensor.cols() != shape.cols) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": expected [", shape.rows, ", ",
                                                   shape.cols, "], got [", tensor.rows(), ", ",
                                                   tensor.cols(), "]"));
  }
  const int64_t rows_per_chunk = std::max<int64_t>(1, staging_elems / shape.cols);
  for (int64_t r = 0; r < shape.rows; r += rows_per_chunk) {
    const int64_t end = std::min(shape.rows, r + rows_per_chunk);
    const int64_t n = (end - r) * shape.cols;
    store.RowsToBFloat16(tensor, r, end, std::span<uint16_t>(staging, n));
    LOOM_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst + r * shape.cols, staging, n * 2, cudaMemcpyHostToDevice));
  }
  return absl::OkStatus();
}

// A norm's weight with the config's offset added in float32, then rounded.
absl::Status CopyNorm(const WeightStore& store, const std::string& name, int64_t n, float offset,
                      __nv_bfloat16* dst, uint16_t* staging) {
  absl::StatusOr<const Tensor*> t = store.Get(name);
  if (!t.ok()) return t.status();
  if ((*t)->num_elements() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected ", n, " values, got ", (*t)->num_elements()));
  }
  std::vector<float> w(n);
  store.ToFloat32(**t, w);
  for (int64_t i = 0; i < n; ++i) staging[i] = FloatToBFloat16(offset + w[i]);
  LOOM_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, staging, n * 2, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

}  // namespace

CudaWeights::CudaWeights(const ModelConfig& config) : config_(config) {}

CudaWeights::~CudaWeights() {
  if (base_ != nullptr) cudaFree(base_);
}

absl::Status CudaWeights::Allocate() {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t attn = static_cast<int64_t>(c.num_heads) * c.head_dim;
  // First pass counts elements, second assigns pointers.
  int64_t offset = 0;
  auto take = [&](int64_t elems) {
    const int64_t at = offset;
    offset += (elems + kAlign - 1) / kAlign * kAlign;
    return at;
  };
  const bool qk = c.qk_norm, sandwich = c.sandwich_norms;
  struct LayerOffsets {
    int64_t in_norm, qkv, bias, q_norm, k_norm, o, post_attn_norm, mlp_norm, gate_up, down,
        post_mlp_norm;
  };
  std::vector<LayerOffsets> lo(c.num_layers);
  const int64_t embed = take(static_cast<int64_t>(c.vocab_size) * hidden);
  for (auto& l : lo) {
    l.in_norm = take(hidden);
    l.qkv = take(QkvRows(c) * hidden);
    l.bias = c.attention_bias ? take(QkvRows(c)) : -1;
    l.q_norm = qk ? take(c.head_dim) : -1;
    l.k_norm = qk ? take(c.head_dim) : -1;
    l.o = take(hidden * attn);
    l.post_attn_norm = sandwich ? take(hidden) : -1;
    l.mlp_norm = take(hidden);
    l.gate_up = take(2 * inter * hidden);
    l.down = take(hidden * inter);
    l.post_mlp_norm = sandwich ? take(hidden) : -1;
  }
  const int64_t final_norm = take(hidden);
  const int64_t lm_head = c.tie_word_embeddings ? embed : take(int64_t{c.vocab_size} * hidden);
  bytes_ = offset * 2;
  if (cudaMalloc(&base_, bytes_) != cudaSuccess) {
    cudaGetLastError();
    base_ = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes_, " bytes of device memory for the weights"));
  }
  auto* b = static_cast<__nv_bfloat16*>(base_);
  embed_ = b + embed;
  final_norm_ = b + final_norm;
  lm_head_ = b + lm_head;
  auto at = [b](int64_t off) { return off >= 0 ? b + off : nullptr; };
  layers_.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerOffsets& l = lo[i];
    layers_[i] = {at(l.in_norm), at(l.qkv),  at(l.bias),           at(l.q_norm),
                  at(l.k_norm),  at(l.o),    at(l.post_attn_norm), at(l.mlp_norm),
                  at(l.gate_up), at(l.down), at(l.post_mlp_norm)};
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::Load(const ModelConfig& config,
                                                               const WeightStore& store) {
  std::unique_ptr<CudaWeights> w(new CudaWeights(config));
  LOOM_RETURN_IF_ERROR(w->Allocate());
  const ModelConfig& c = config;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size, hd = c.head_dim;
  const int64_t q_rows = int64_t{c.num_heads} * hd, kv_rows = int64_t{c.num_kv_heads} * hd;
  const int64_t staging_elems = int64_t{16} << 20;  // 32 MiB of pinned bf16
  uint16_t* staging = nullptr;
  LOOM_CUDA_RETURN_IF_ERROR(cudaMallocHost(&staging, staging_elems * 2));
  absl::Status status = absl::OkStatus();
  auto copy = [&](const std::string& name, Shape shape, __nv_bfloat16* dst) {
    if (status.ok()) status = CopyTensor(store, name, shape, dst, staging, staging_elems);
  };
  auto norm = [&](const std::string& name, int64_t n, __nv_bfloat16* dst) {
    if (status.ok() && dst != nullptr) {
      status = CopyNorm(store, name, n, c.rms_norm_weight_offset, dst, staging);
    }
  };
  copy("model.embed_tokens.weight", {c.vocab_size, hidden}, w->embed_);
  norm("model.norm.weight", hidden, w->final_norm_);
  if (!c.tie_word_embeddings) copy("lm_head.weight", {c.vocab_size, hidden}, w->lm_head_);
  for (int i = 0; i < c.num_layers && status.ok(); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    const CudaLayerWeights& l = w->layers_[i];
    norm(p + "input_layernorm.weight", hidden, l.input_norm);
    norm(p + "self_attn.q_norm.weight", hd, l.q_norm);
    norm(p + "self_attn.k_norm.weight", hd, l.k_norm);
    copy(p + "self_attn.q_proj.weight", {q_rows, hidden}, l.qkv);
    copy(p + "self_attn.k_proj.weight", {kv_rows, hidden}, l.qkv + q_rows * hidden);
    copy(p + "self_attn.v_proj.weight", {kv_rows, hidden}, l.qkv + (q_rows + kv_rows) * hidden);
    if (l.qkv_bias != nullptr) {
      copy(p + "self_attn.q_proj.bias", {1, q_rows}, l.qkv_bias);
      copy(p + "self_attn.k_proj.bias", {1, kv_rows}, l.qkv_bias + q_rows);
      copy(p + "self_attn.v_proj.bias", {1, kv_rows}, l.qkv_bias + q_rows + kv_rows);
    }
    copy(p + "self_attn.o_proj.weight", {hidden, q_rows}, l.o);
    if (c.sandwich_norms) {
      norm(p + "post_attention_layernorm.weight", hidden, l.post_attn_norm);
      norm(p + "pre_feedforward_layernorm.weight", hidden, l.mlp_norm);
      norm(p + "post_feedforward_layernorm.weight", hidden, l.post_mlp_norm);
    } else {
      norm(p + "post_attention_layernorm.weight", hidden, l.mlp_norm);
    }
    copy(p + "mlp.gate_proj.weight", {inter, hidden}, l.gate_up);
    copy(p + "mlp.up_proj.weight", {inter, hidden}, l.gate_up + inter * hidden);
    copy(p + "mlp.down_proj.weight", {hidden, inter}, l.down);
  }
  LOOM_CUDA_RETURN_IF_ERROR(cudaFreeHost(staging));
  if (!status.ok()) return status;
  return w;
}

absl::StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::Dummy(const ModelConfig& config,
                                                                uint64_t seed) {
  std::unique_ptr<CudaWeights> w(new CudaWeights(config));
  LOOM_RETURN_IF_ERROR(w->Allocate());
  const ModelConfig& c = config;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t attn = int64_t{c.num_heads} * c.head_dim;
  uint64_t n = 0;
  absl::Status status = absl::OkStatus();
  auto random = [&](__nv_bfloat16* dst, int64_t elems, int64_t in) {
    if (!status.ok()) return;
    status = cuda::RandomFillBFloat16(nullptr, dst, elems, 1.0f / std::sqrt(static_cast<float>(in)),
                                      seed * 1000003 + n++);
  };
  auto ones = [&](__nv_bfloat16* dst, int64_t elems) {
    if (status.ok() && dst != nullptr) status = cuda::FillBFloat16(nullptr, dst, elems, 1.0f);
  };
  random(w->embed_, int64_t{c.vocab_size} * hidden, hidden);
  ones(w->final_norm_, hidden);
  if (!c.tie_word_embeddings) random(w->lm_head_, int64_t{c.vocab_size} * hidden, hidden);
  for (const CudaLayerWeights& l : w->layers_) {
    ones(l.input_norm, hidden);
    random(l.qkv, QkvRows(c) * hidden, hidden);
    if (l.qkv_bias != nullptr) random(l.qkv_bias, QkvRows(c), hidden);
    ones(l.q_norm, c.head_dim);
    ones(l.k_norm, c.head_dim);
    random(l.o, hidden * attn, attn);
    ones(l.post_attn_norm, hidden);
    ones(l.mlp_norm, hidden);
    random(l.gate_up, 2 * inter * hidden, hidden);
    random(l.down, hidden * inter, inter);
    ones(l.post_mlp_norm, hidden);
  }
  if (!status.ok()) return status;
  LOOM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return w;
}

}  // namespace loom
