#include "model/llama_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "base/check.h"
#include "base/float16.h"
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

// Runs fn in the calling thread: a screened row's few float32 logits.
class InlineFor final : public kernels::ParallelFor {
 public:
  int NumThreads() const override { return 1; }
  void Run(int64_t n, int64_t /*grain*/, const std::function<void(int64_t, int64_t)>& fn) override {
    if (n > 0) fn(0, n);
  }
};

// Calls fn(part, its first row, its first block, bytes a row) for each run of
// rows of one block type of a quantized weight, in order; stops where fn
// returns false.
template <class Fn>
void ForEachPart(const LinearWeight& w, Fn&& fn) {
  const std::byte* blocks = w.quant.data();
  int32_t row = 0;
  for (const QuantRows& part : w.parts) {
    const int64_t row_bytes =
        w.k / kc::QuantBlockValues(part.type) * kc::QuantBlockBytes(part.type);
    if (!fn(part, row, blocks, row_bytes)) return;
    blocks += part.rows * row_bytes;
    row += part.rows;
  }
}

// Rows [begin, begin + count) of w in float32, as its products use them.
void WeightRows(const LinearWeight& w, int64_t begin, int64_t count, float* out) {
  const int64_t k = w.k;
  switch (w.dtype) {
    case LinearDType::kFloat32:
      std::copy_n(w.f32.data() + begin * k, count * k, out);
      return;
    case LinearDType::kBFloat16:
      for (int64_t i = 0; i < count * k; ++i) out[i] = BFloat16ToFloat(w.bf16[begin * k + i]);
      return;
    case LinearDType::kQuantized:
      break;
  }
  ForEachPart(
      w, [&](const QuantRows& part, int64_t row, const std::byte* blocks, int64_t row_bytes) {
        const int64_t first = std::max(begin, row), last = std::min(begin + count, row + part.rows);
        if (first < last) {
          kc::DequantizeBlocks(part.type, blocks + (first - row) * row_bytes, (last - first) * k,
                               out + (first - begin) * k);
        }
        return true;
      });
}

}  // namespace

std::optional<XPrecision> XPrecisionNamed(std::string_view name) {
  if (name == "float32") return XPrecision::kFloat32;
  if (name == "int16") return XPrecision::kInt16;
  if (name == "int8") return XPrecision::kInt8;
  return std::nullopt;
}

int32_t LlamaForward::Int16DecodeMinTokens() {
  static const int32_t tokens = kc::DetectedSimd() == kc::SimdLevel::kAvx512 ? 8 : 1;
  return tokens;
}

void LlamaForward::Linear(const float* x, int32_t m, const LinearWeight& w, float* y,
                          kernels::ParallelFor& pool, bool head) const {
  const float* bias = w.bias.empty() ? nullptr : w.bias.data();
  switch (w.dtype) {
    case LinearDType::kFloat32:
      kc::Matmul({x, w.f32.data(), bias, y, m, w.n, w.k, w.k, w.n}, pool);
      return;
    case LinearDType::kBFloat16:
      kc::MatmulBf16({x, w.bf16.data(), bias, y, m, w.n, w.k, w.k, w.n}, pool);
      return;
    case LinearDType::kQuantized:
      break;
  }
  // One product per run of rows in one block type, into its columns of y.
  ForEachPart(w, [&](const QuantRows& part, int32_t row, const std::byte* blocks, int64_t) {
    kc::MatmulQuantParams p{
        x, blocks, part.type, bias ? bias + row : nullptr, y + row, m, part.rows, w.k, w.k, w.n};
    XPrecision precision = m >= kInt8PrefillMinTokens ? prefill_ : decode_;
    const int32_t min_tokens = precision == XPrecision::kInt16 ? Int16DecodeMinTokens()
                               : kc::HasInt8Dots(part.type)    ? 1
                                                               : kInt8DecodeMinTokens;
    if (m < min_tokens) precision = XPrecision::kFloat32;
    p.quantize_x = precision == XPrecision::kInt8;
    p.int16_x = precision == XPrecision::kInt16 && (!head || m < kMinScreenedRows);
    kc::MatmulQuant(p, pool);
    return true;
  });
}

void LlamaForward::ScreenGreedyHead(kernels::ParallelFor& pool) {
  if (prefill_ == XPrecision::kInt8 || decode_ == XPrecision::kInt8) return;
  const LinearWeight& head = weights_.head();
  head_screen_ = kc::HeadScreen::Build(
      head.n, head.k,
      [&head](int64_t begin, int64_t count, float* out) { WeightRows(head, begin, count, out); },
      pool);
}

void LlamaForward::Head(const ForwardBatch& batch, int32_t rows, std::vector<float>& logits,
                        kernels::ParallelFor& pool) {
  const LinearWeight& head = weights_.head();
  const int32_t hidden = config_.hidden_size;
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  logits.resize(static_cast<size_t>(rows) * vocab);
  argmax_.assign(rows, -1);
  screened_.clear();
  if (head_screen_.Ready() && rows < kc::kPanelMinRows &&
      batch.argmax_only.size() == static_cast<size_t>(rows)) {
    for (int32_t r = 0; r < rows; ++r) {
      if (batch.argmax_only[r] != 0) screened_.push_back(r);
    }
  }
  if (screened_.size() < static_cast<size_t>(kMinScreenedRows)) {
    screened_.clear();
    Linear(final_normed_.data(), rows, head, logits.data(), pool, /*head=*/true);
    return;
  }
  // Every other row's logits, a run of rows at a time (a row's bits do not
  // depend on the rows beside it below kPanelMinRows).
  for (int32_t r = 0; r < rows;) {
    if (batch.argmax_only[r] != 0) {
      ++r;
      continue;
    }
    int32_t end = r;
    while (end < rows && batch.argmax_only[end] == 0) ++end;
    Linear(final_normed_.data() + static_cast<size_t>(r) * hidden, end - r, head,
           logits.data() + r * vocab, pool, /*head=*/true);
    r = end;
  }
  const auto count = static_cast<int32_t>(screened_.size());
  screened_x_.resize(static_cast<size_t>(count) * hidden);
  for (int32_t s = 0; s < count; ++s) {
    std::copy_n(final_normed_.data() + static_cast<size_t>(screened_[s]) * hidden, hidden,
                screened_x_.data() + static_cast<size_t>(s) * hidden);
  }
  if (!head_screen_.Candidates(screened_x_.data(), count, hidden, pool, candidates_)) {
    candidates_.assign(count, {});  // x is not finite: the rows' logits decide
  }
  InlineFor one_thread;
  for (int32_t s = 0; s < count; ++s) {
    const int32_t r = screened_[s];
    const float* x = screened_x_.data() + static_cast<size_t>(s) * hidden;
    if (candidates_[s].empty()) {
      Linear(x, 1, head, logits.data() + r * vocab, pool, /*head=*/true);
      continue;
    }
    int32_t best = -1;
    float best_logit = 0.0f;
    for (int32_t j : candidates_[s]) {
      const float logit = HeadLogit(x, j, one_thread);
      if (best < 0 || logit > best_logit) {
        best = j;
        best_logit = logit;
      }
    }
    argmax_[r] = best;
    ++screened_rows_;
  }
}

float LlamaForward::HeadLogit(const float* x, int32_t j, kernels::ParallelFor& pool) const {
  const LinearWeight& w = weights_.head();
  const int32_t k = w.k;
  const float* bias = w.bias.empty() ? nullptr : w.bias.data() + j;
  float y = 0.0f;
  switch (w.dtype) {
    case LinearDType::kFloat32:
      kc::Matmul({x, w.f32.data() + static_cast<size_t>(j) * k, bias, &y, 1, 1, k, k, 1}, pool);
      return y;
    case LinearDType::kBFloat16:
      kc::MatmulBf16({x, w.bf16.data() + static_cast<size_t>(j) * k, bias, &y, 1, 1, k, k, 1},
                     pool);
      return y;
    case LinearDType::kQuantized:
      break;
  }
  bool found = false;
  ForEachPart(w, [&](const QuantRows& part, int32_t row, const std::byte* blocks,
                     int64_t row_bytes) {
    if (j >= row + part.rows) return true;
    kc::MatmulQuant({x, blocks + (j - row) * row_bytes, part.type, bias, &y, 1, 1, k, k, 1}, pool);
    found = true;
    return false;
  });
  LOOM_CHECK(found) << "head row " << j << " of " << w.n;
  return y;
}

void ForwardBatch::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.assign(1, 0);
  context_lens.clear();
  block_tables.clear();
  max_blocks_per_seq = 0;
  num_entries = 1;
  logit_rows.clear();
  argmax_only.clear();
}

LlamaForward::LlamaForward(const ModelConfig& config, const LlamaWeights& weights,
                           XPrecision prefill, XPrecision decode)
    : config_(config),
      weights_(weights),
      prefill_(prefill),
      decode_(decode),
      kv_layout_(KvLayoutOf(config)),
      inv_freq_(RopeInverseFrequencies(config)),
      inv_freq_local_(RopeInverseFrequencies(config, /*sliding=*/true)) {}

void LlamaForward::Embed(const ForwardBatch& batch, kernels::ParallelFor& pool) {
  const ModelConfig& c = config_;
  const LinearWeight& table = weights_.embed;
  const int32_t t = batch.num_tokens();
  if (table.dtype == LinearDType::kFloat32) {
    kc::Embedding({batch.token_ids.data(), table.f32.data(), residual_.data(), t, c.hidden_size,
                   c.vocab_size, c.embedding_scale},
                  pool);
    return;
  }
  // A table in blocks: each token's row decoded as the matmul decodes it.
  LOOM_CHECK(table.dtype == LinearDType::kQuantized && table.parts.size() == 1);
  const kc::QuantType type = table.parts[0].type;
  const int64_t row_bytes = c.hidden_size / kc::QuantBlockValues(type) * kc::QuantBlockBytes(type);
  pool.Run(t, 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int32_t id = batch.token_ids[i];
      LOOM_CHECK(id >= 0 && id < c.vocab_size) << "token id " << id;
      float* out = residual_.data() + i * c.hidden_size;
      kc::DequantizeBlocks(type, table.quant.data() + id * row_bytes, c.hidden_size, out);
      if (c.embedding_scale != 1.0f) {
        for (int32_t j = 0; j < c.hidden_size; ++j) out[j] = out[j] * c.embedding_scale;
      }
    }
  });
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
  if (c.sandwich_norms) post_normed_.resize(residual_.size());
  qkv_.resize(static_cast<size_t>(t) * qkv_width);
  attn_.resize(static_cast<size_t>(t) * q_width);
  gate_up_.resize(static_cast<size_t>(t) * 2 * c.intermediate_size);
  act_.resize(static_cast<size_t>(t) * c.intermediate_size);

  Embed(batch, pool);
  const float* layer_out = nullptr;
  for (int32_t i = 0; i < c.num_layers; ++i) {
    layer_out = Layer(i, layer_out, batch, kv, pool);
    on_layer();
  }

  // The last residual add and the final norm, only for the rows that sample.
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  final_x_.resize(static_cast<size_t>(rows) * hidden);
  final_residual_.resize(final_x_.size());
  final_normed_.resize(final_x_.size());
  for (int32_t r = 0; r < rows; ++r) {
    const size_t src = static_cast<size_t>(batch.logit_rows[r]) * hidden;
    std::memcpy(&final_x_[static_cast<size_t>(r) * hidden], &layer_out[src],
                hidden * sizeof(float));
    std::memcpy(&final_residual_[static_cast<size_t>(r) * hidden], &residual_[src],
                hidden * sizeof(float));
  }
  kc::RmsNorm({final_x_.data(), final_residual_.data(), weights_.final_norm.data(),
               final_normed_.data(), rows, hidden, c.rms_norm_eps},
              pool);
  Head(batch, rows, logits, pool);
}

const float* LlamaForward::Layer(int32_t index, const float* prev_out, const ForwardBatch& batch,
                                 KvPool& kv, kernels::ParallelFor& pool) {
  const ModelConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[index];
  const int32_t t = batch.num_tokens();
  const int32_t hidden = c.hidden_size;
  const int32_t inter = c.intermediate_size;

  // The previous layer's output joins the residual stream inside the norm.
  kc::RmsNorm(
      {prev_out, residual_.data(), w.input_norm.data(), normed_.data(), t, hidden, c.rms_norm_eps},
      pool);
  Attention(index, batch, kv, pool);
  Linear(attn_.data(), t, w.o_proj, proj_.data(), pool);
  const float* attn_out = PostNorm(w.post_attn_norm, t, pool);
  kc::RmsNorm(
      {attn_out, residual_.data(), w.mlp_norm.data(), normed_.data(), t, hidden, c.rms_norm_eps},
      pool);
  Linear(normed_.data(), t, w.gate_up, gate_up_.data(), pool);
  const kernels::SiluMulParams<float> act{
      gate_up_.data(), gate_up_.data() + inter, act_.data(), t, inter, 2 * inter, inter};
  if (c.hidden_activation == Activation::kGeluTanh) {
    kc::GeluTanhMul(act, pool);
  } else {
    kc::SiluMul(act, pool);
  }
  Linear(act_.data(), t, w.down, proj_.data(), pool);
  return PostNorm(w.post_mlp_norm, t, pool);
}

const float* LlamaForward::PostNorm(const std::vector<float>& weight, int32_t t,
                                    kernels::ParallelFor& pool) {
  if (weight.empty()) return proj_.data();
  kc::RmsNorm({nullptr, proj_.data(), weight.data(), post_normed_.data(), t, config_.hidden_size,
               config_.rms_norm_eps},
              pool);
  return post_normed_.data();
}

void LlamaForward::Attention(int32_t index, const ForwardBatch& batch, KvPool& kv,
                             kernels::ParallelFor& pool) {
  const ModelConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[index];
  const int32_t t = batch.num_tokens();
  const int32_t d = c.head_dim;
  const int32_t q_width = c.num_heads * d;
  const int32_t kv_width = c.num_kv_heads * d;
  const int32_t qkv_width = q_width + 2 * kv_width;
  const bool sliding = IsSlidingLayer(c, index);

  Linear(normed_.data(), t, w.qkv, qkv_.data(), pool);
  if (c.qk_norm) {
    kc::HeadRmsNorm({qkv_.data(), w.q_norm.data(), qkv_width, t, c.num_heads, d, c.rms_norm_eps},
                    pool);
    kc::HeadRmsNorm(
        {qkv_.data() + q_width, w.k_norm.data(), qkv_width, t, c.num_kv_heads, d, c.rms_norm_eps},
        pool);
  }

  // The layer's buffer, through the block tables of its entry.
  const int32_t entry = kv_layout_.entry[index];
  const int32_t buffer = kv_layout_.buffer[index];
  kernels::PagedKv<float> view;
  view.k_cache = kv.k[buffer].data();
  view.v_cache = kv.v[buffer].data();
  view.num_blocks = kv.num_blocks;
  view.num_kv_heads = c.num_kv_heads;
  view.block_size = kv.block_size;
  view.head_dim = d;
  view.block_tables = batch.block_tables.data() + entry;
  view.max_blocks_per_seq = batch.max_blocks_per_seq;
  view.block_stride = batch.num_entries;
  view.context_lens = batch.context_lens.data();
  view.query_start = batch.query_start.data();
  view.num_seqs = batch.num_seqs();
  view.positions = batch.positions.data();
  view.slot_mapping = batch.SlotMapping(entry);
  view.num_tokens = t;
  view.sliding_window = sliding ? c.sliding_window : 0;

  kernels::RopeKvWriteParams<float> rope;
  rope.q = qkv_.data();
  rope.k = qkv_.data() + q_width;
  rope.v = qkv_.data() + q_width + kv_width;
  rope.q_stride = rope.k_stride = rope.v_stride = qkv_width;
  rope.num_heads = c.num_heads;
  rope.inv_freq = sliding ? inv_freq_local_.data() : inv_freq_.data();
  rope.kv = view;
  kc::RopeKvWrite(rope, pool);

  kernels::PagedAttentionParams<float> attn;
  attn.q = qkv_.data();
  attn.out = attn_.data();
  attn.q_stride = qkv_width;
  attn.out_stride = q_width;
  attn.num_heads = c.num_heads;
  attn.scale = AttentionScale(c);
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
}

}  // namespace loom
