// The Llama-family forward pass on the CPU over a packed step of tokens
// (prefill chunks and decodes together), reading and writing K/V through the
// paged pool and computing logits only for the rows that sample.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/zero_pages.h"
#include "kernels/parallel.h"
#include "model/config.h"
#include "model/llama_forward_weights.h"

namespace loom {

// One step's inputs, packed sequence after sequence (see kernels/paged_kv.h).
struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens]
  std::vector<int32_t> slot_mapping;  // [num_tokens]
  std::vector<int32_t> query_start;   // [num_seqs + 1]
  std::vector<int32_t> context_lens;  // [num_seqs]
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], 0-padded
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logit_rows;  // token rows whose logits are wanted

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  void Clear();
};

// The per-layer K and V pools: [num_blocks, kv_heads, block_size, head_dim]
// each, on pages committed as blocks are first written (base/zero_pages.h).
struct KvPool {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  std::vector<ZeroPages<float>> k;  // [layer]
  std::vector<ZeroPages<float>> v;  // [layer]

  // num_layers pools of layer_elems floats each, reading as zeros.
  void Allocate(int32_t num_layers, size_t layer_elems) {
    k.clear();
    v.clear();
    for (int32_t l = 0; l < num_layers; ++l) {
      k.emplace_back(layer_elems);
      v.emplace_back(layer_elems);
    }
  }
};

class LlamaForward {
 public:
  // config and weights must outlive this object. int8_prefill: Q4_0/Q4_1
  // matmuls of 33 tokens or more round their activations to int8
  // (MatmulQuantParams::quantize_x).
  LlamaForward(const ModelConfig& config, const LlamaWeights& weights, bool int8_prefill = false);

  // Runs the batch; writes [logit_rows.size(), vocab] logits. on_layer runs
  // after each layer (progress for the engine's liveness).
  void Run(
      const ForwardBatch& batch, KvPool& kv, kernels::ParallelFor& pool, std::vector<float>& logits,
      absl::FunctionRef<void()> on_layer = [] {});

 private:
  void Layer(int32_t index, const ForwardBatch& batch, KvPool& kv, kernels::ParallelFor& pool);

  // y[m, w.n] = x[m, w.k] W^T (+ bias).
  void Linear(const float* x, int32_t m, const LinearWeight& w, float* y,
              kernels::ParallelFor& pool) const;

  const ModelConfig& config_;
  const LlamaWeights& weights_;
  const bool int8_prefill_;
  std::vector<float> inv_freq_;
  // Activations, [num_tokens, width], reused across steps.
  std::vector<float> residual_, normed_, qkv_, attn_, proj_, gate_up_, act_;
  std::vector<float> partial_out_, partial_max_, partial_sum_;
  std::vector<float> final_x_, final_residual_, final_normed_;
};

}  // namespace loom
