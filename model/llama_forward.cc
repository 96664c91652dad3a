#include "model/llama_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace loom {
namespace {

namespace kc = kernels::cpu;

// Decode contexts split into partitions of this many positions (flash-decoding),
// so a few long sequences still spread over every thread.
constexpr int32_t kPartitionSize = 256;

}  // namespace

void ForwardBatch::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.assign(1, 0);
  context_lens.clear();
  block_tables.clear();
  max_blocks_per_seq = 0;
  logit_rows.clear();
}

LlamaForward::LlamaForward(const ModelConfig& config, const LlamaWeights& weights,
                           bool int8_prefill)
    : config_(config),
      weights_(weights),
      int8_prefill_(int8_prefill),
      inv_freq_(RopeInverseFrequencies(config)) {}

void LlamaForward::Linear(const float* x, int32_t m, const LinearWeight& w, float* y,
                          kernels::ParallelFor& pool) const {
  const float* bias = w.bias.empty() ? nullptr : w.bias.data();
  kc::QuantType quant = kc::QuantType::kQ4_1;
  switch (w.dtype) {
    case LinearDType::kFloat32:
      kc::Matmul({x, w.f32.data(), bias, y, m, w.n, w.k, w.k, w.n}, pool);
      return;
    case LinearDType::kBFloat16:
      kc::MatmulBf16({x, w.bf16.data(), bias, y, m, w.n, w.k, w.k, w.n}, pool);
      return;
    case LinearDType::kQ8_0:
      quant = kc::QuantType::kQ8_0;
      break;
    case LinearDType::kQ4_0:
      quant = kc::QuantType::kQ4_0;
      break;
    case LinearDType::kQ4_1:
      break;
  }
  kc::MatmulQuantParams p{x, w.quant.data(), quant, bias, y, m, w.n, w.k, w.k, w.n};
  p.quantize_x = int8_prefill_;
  kc::MatmulQuant(p, pool);
}

void LlamaForward::Run(const ForwardBatch& batch, KvPool& kv, kernels::ParallelFor& pool,
                       std::vector<float>& logits, absl::FunctionRef<void()> on_layer) {
  const ModelConfig& c = config_;
  const int32_t t = batch.num_tokens();
  const int32_t hidden = c.hidden_size;
  const int32_t q_width = c.num_heads * c.head_dim;
  const int32_t qkv_width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  residual_.resize(static_cast<size_t>(t) * hidden);
  normed_.resize(residual_.size());
  proj_.resize(residual_.size());
  qkv_.resize(static_cast<size_t>(t) * qkv_width);
  attn_.resize(static_cast<size_t>(t) * q_width);
  gate_up_.resize(static_cast<size_t>(t) * 2 * c.intermediate_size);
  act_.resize(static_cast<size_t>(t) * c.intermediate_size);

  kc::Embedding(
      {batch.token_ids.data(), weights_.embed.data(), residual_.data(), t, hidden, c.vocab_size},
      pool);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    Layer(i, batch, kv, pool);
    on_layer();
  }

  // The last residual add and the final norm, only for the rows that sample.
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  final_x_.resize(static_cast<size_t>(rows) * hidden);
  final_residual_.resize(final_x_.size());
  final_normed_.resize(final_x_.size());
  for (int32_t r = 0; r < rows; ++r) {
    const size_t src = static_cast<size_t>(batch.logit_rows[r]) * hidden;
    std::memcpy(&final_x_[static_cast<size_t>(r) * hidden], &proj_[src], hidden * sizeof(float));
    std::memcpy(&final_residual_[static_cast<size_t>(r) * hidden], &residual_[src],
                hidden * sizeof(float));
  }
  kc::RmsNorm({final_x_.data(), final_residual_.data(), weights_.final_norm.data(),
               final_normed_.data(), rows, hidden, c.rms_norm_eps},
              pool);
  logits.resize(static_cast<size_t>(rows) * c.vocab_size);
  Linear(final_normed_.data(), rows, weights_.lm_head, logits.data(), pool);
}

void LlamaForward::Layer(int32_t index, const ForwardBatch& batch, KvPool& kv,
                         kernels::ParallelFor& pool) {
  const ModelConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[index];
  const int32_t t = batch.num_tokens();
  const int32_t hidden = c.hidden_size;
  const int32_t d = c.head_dim;
  const int32_t q_width = c.num_heads * d;
  const int32_t kv_width = c.num_kv_heads * d;
  const int32_t qkv_width = q_width + 2 * kv_width;
  const int32_t inter = c.intermediate_size;

  // The previous layer's MLP output joins the residual stream inside the norm.
  kc::RmsNorm({index == 0 ? nullptr : proj_.data(), residual_.data(), w.input_norm.data(),
               normed_.data(), t, hidden, c.rms_norm_eps},
              pool);
  Linear(normed_.data(), t, w.qkv, qkv_.data(), pool);

  kernels::PagedKv<float> view;
  view.k_cache = kv.k[index].data();
  view.v_cache = kv.v[index].data();
  view.num_blocks = kv.num_blocks;
  view.num_kv_heads = c.num_kv_heads;
  view.block_size = kv.block_size;
  view.head_dim = d;
  view.block_tables = batch.block_tables.data();
  view.max_blocks_per_seq = batch.max_blocks_per_seq;
  view.context_lens = batch.context_lens.data();
  view.query_start = batch.query_start.data();
  view.num_seqs = batch.num_seqs();
  view.positions = batch.positions.data();
  view.slot_mapping = batch.slot_mapping.data();
  view.num_tokens = t;

  kernels::RopeKvWriteParams<float> rope;
  rope.q = qkv_.data();
  rope.k = qkv_.data() + q_width;
  rope.v = qkv_.data() + q_width + kv_width;
  rope.q_stride = rope.k_stride = rope.v_stride = qkv_width;
  rope.num_heads = c.num_heads;
  rope.inv_freq = inv_freq_.data();
  rope.kv = view;
  kc::RopeKvWrite(rope, pool);

  kernels::PagedAttentionParams<float> attn;
  attn.q = qkv_.data();
  attn.out = attn_.data();
  attn.q_stride = qkv_width;
  attn.out_stride = q_width;
  attn.num_heads = c.num_heads;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(d));
  attn.kv = view;
  const int32_t max_context =
      *std::max_element(batch.context_lens.begin(), batch.context_lens.end());
  if (max_context > kPartitionSize && kPartitionSize % kv.block_size == 0) {
    attn.partition_size = kPartitionSize;
    attn.max_partitions = (max_context + kPartitionSize - 1) / kPartitionSize;
    const size_t slots = static_cast<size_t>(t) * c.num_heads * attn.max_partitions;
    partial_out_.resize(slots * d);
    partial_max_.resize(slots);
    partial_sum_.resize(slots);
    attn.partial_out = partial_out_.data();
    attn.partial_max = partial_max_.data();
    attn.partial_sum = partial_sum_.data();
  }
  kc::PagedAttention(attn, pool);

  Linear(attn_.data(), t, w.o_proj, proj_.data(), pool);
  kc::RmsNorm({proj_.data(), residual_.data(), w.post_norm.data(), normed_.data(), t, hidden,
               c.rms_norm_eps},
              pool);
  Linear(normed_.data(), t, w.gate_up, gate_up_.data(), pool);
  kc::SiluMul({gate_up_.data(), gate_up_.data() + inter, act_.data(), t, inter, 2 * inter, inter},
              pool);
  Linear(act_.data(), t, w.down, proj_.data(), pool);
}

}  // namespace loom
