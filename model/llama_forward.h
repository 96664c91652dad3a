// The Llama-family forward pass on the CPU (Llama, Mistral, Qwen2, Qwen3,
// Gemma 3) over a packed step of tokens (prefill chunks and decodes
// together), reading and writing K/V through the paged pool and computing
// logits only for the rows that sample.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/zero_pages.h"
#include "kernels/cpu/head_screen.h"
#include "kernels/matmul.h"
#include "kernels/parallel.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/llama_forward_weights.h"

namespace loom {

// One step's inputs, packed sequence after sequence (see kernels/paged_kv.h).
// Block tables are the plan's, num_entries table entries per logical block
// (model/kv_layout.h); slots come once per entry: each layer reads those of
// its entry.
struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [num_tokens]
  std::vector<int32_t> positions;  // [num_tokens]
  // [num_entries][num_tokens]
  std::vector<int32_t> slot_mapping;
  std::vector<int32_t> query_start;   // [num_seqs + 1]
  std::vector<int32_t> context_lens;  // [num_seqs]
  // [num_seqs, max_blocks_per_seq] table entries, 0-padded
  std::vector<int32_t> block_tables;
  int32_t max_blocks_per_seq = 0;
  int32_t num_entries = 1;
  std::vector<int32_t> logit_rows;  // token rows whose logits are wanted
  // Per logit row (or empty: none): 1 where only the row's largest logit
  // matters (a greedy row with nothing that changes its logits), which
  // LlamaForward may then find without the others (argmax()).
  std::vector<uint8_t> argmax_only;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  const int32_t* SlotMapping(int32_t entry) const {
    return slot_mapping.data() + static_cast<size_t>(entry) * num_tokens();
  }
  void Clear();
};

// The K and V pools, one per buffer of model/kv_layout.h (one per layer
// without sliding layers): [num_blocks, kv_heads, block_size, head_dim] each,
// on pages committed as blocks are first written (base/zero_pages.h).
struct KvPool {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  std::vector<ZeroPages<float>> k;  // [buffer]
  std::vector<ZeroPages<float>> v;  // [buffer]

  // num_buffers pools of layer_elems floats each, reading as zeros.
  void Allocate(int32_t num_buffers, size_t layer_elems) {
    k.clear();
    v.clear();
    for (int32_t l = 0; l < num_buffers; ++l) {
      k.emplace_back(layer_elems);
      v.emplace_back(layer_elems);
    }
  }
};

// How a step's quantized matmuls take their activations (docs/golden.md):
// float32, rounded to int16 per block of 32 (MatmulQuantParams::int16_x; the
// head only in steps of fewer than kMinScreenedRows rows), or to int8
// (quantize_x).
enum class XPrecision { kFloat32, kInt16, kInt8 };

// The precision a flag value names ("float32", "int16", "int8"), else nullopt.
std::optional<XPrecision> XPrecisionNamed(std::string_view name);

class LlamaForward {
 public:
  // config and weights must outlive this object. `prefill` applies to steps
  // of kInt8PrefillMinTokens tokens or more, `decode` to steps of
  // kInt8DecodeMinTokens (int8; the K-quants' int8 dots from 1 token) or
  // Int16DecodeMinTokens() (int16) up to that; smaller steps stay float32.
  LlamaForward(const ModelConfig& config, const LlamaWeights& weights,
               XPrecision prefill = XPrecision::kFloat32, XPrecision decode = XPrecision::kFloat32);

  // Steps from which int8_prefill applies: the panel GEMM's (prefill) sizes.
  static constexpr int32_t kInt8PrefillMinTokens = kernels::cpu::kPanelMinRows;
  // Steps from which int8_decode applies to the 32-value blocks: below 4
  // tokens the int8 panels, which repack W for every product, are slower than
  // the float32 register tiles (SmolLM2 at 1 stream: 12.4 against 10.3 ms a
  // token). The K-quants' int8 dots (kernels::cpu::HasInt8Dots) read W as it
  // is stored and apply from 1 token.
  static constexpr int32_t kInt8DecodeMinTokens = 4;
  // Steps from which int16 decode applies. With AVX-512 VNNI: 8, where its
  // tiles start (they cost the same from 1 to 8 rows of x: BM_MatmulQuant<true>,
  // SmolLM2's 1536 x 576 Q4_1, 134 us at 4 rows, 111 at 8, 141 at 16, where
  // the float32 tiles take 62-75 at 4 rows and 107-125 at 8). With AVX2 only:
  // every step; MatmulQuant runs the dot path (kernels/cpu/matmul_quant_dot.h)
  // where it is faster than the float32 tiles (K-quants up to 32 rows, the
  // other blocks up to 3) and float32 elsewhere (docs/benchmarks.md).
  static int32_t Int16DecodeMinTokens();
  // Steps with fewer logit rows read the head whole: below this, reading the
  // screen costs about what the float32 head does (BM_HeadScreen against
  // BM_MatmulQuant, SmolLM2's head: 1.9 against 2.7 ms at 4 rows, 1.57
  // against 1.52 at 2). Those steps may round the head's x to int16.
  static constexpr int32_t kMinScreenedRows = 4;

  // From now on, finds the token of a batch's argmax_only rows by screening
  // the head (kernels/cpu/head_screen.h) when it can and it pays: no int8
  // activations (they change the head's bits with the number of rows), fewer
  // logit rows than the panel GEMM's (whose bits differ from the one-row
  // product's), and at least 4 such rows.
  // Builds an int8 copy of the head (1 byte a weight).
  void ScreenGreedyHead(kernels::ParallelFor& pool);

  // Runs the batch; writes [logit_rows.size(), vocab] logits, except for the
  // rows whose argmax() it found without them. on_layer runs after each
  // layer (progress for the engine's liveness).
  void Run(
      const ForwardBatch& batch, KvPool& kv, kernels::ParallelFor& pool, std::vector<float>& logits,
      absl::FunctionRef<void()> on_layer = [] {});

  // Per logit row of the last Run: the largest logit's id (the lowest on
  // ties) where Run found it by screening, else -1 (the row's logits are
  // written).
  const std::vector<int32_t>& argmax() const { return argmax_; }
  // Rows whose argmax screening found, since ScreenGreedyHead.
  int64_t screened_rows() const { return screened_rows_; }

 private:
  // residual_ = the scaled embedding rows of the batch's tokens.
  void Embed(const ForwardBatch& batch, kernels::ParallelFor& pool);
  // One decoder layer over normed input from residual_ (plus prev_out, the
  // last layer's output, added in first; null for layer 0). Returns this
  // layer's output, which the next layer (or the final norm) adds in.
  const float* Layer(int32_t index, const float* prev_out, const ForwardBatch& batch, KvPool& kv,
                     kernels::ParallelFor& pool);
  // normed_ -> qkv (q/k normed) -> RoPE and KV write -> attention into attn_.
  void Attention(int32_t index, const ForwardBatch& batch, KvPool& kv, kernels::ParallelFor& pool);
  // proj_, or with a sandwich norm's weight proj_ normed into post_normed_.
  const float* PostNorm(const std::vector<float>& weight, int32_t t, kernels::ParallelFor& pool);

  // y[m, w.n] = x[m, w.k] W^T (+ bias). The head's x is rounded to int16
  // only in steps below kMinScreenedRows rows, where the screen never runs:
  // from there on its rows keep the bits HeadLogit gives them.
  void Linear(const float* x, int32_t m, const LinearWeight& w, float* y,
              kernels::ParallelFor& pool, bool head = false) const;
  // The head's logits for final_normed_ rows [0, rows), screening the
  // batch's argmax_only rows when the screen is ready.
  void Head(const ForwardBatch& batch, int32_t rows, std::vector<float>& logits,
            kernels::ParallelFor& pool);
  // Row j of x[hidden] W_head^T with the bits Linear gives it.
  float HeadLogit(const float* x, int32_t j, kernels::ParallelFor& pool) const;

  const ModelConfig& config_;
  const LlamaWeights& weights_;
  const XPrecision prefill_;
  const XPrecision decode_;
  const ModelKvLayout kv_layout_;
  std::vector<float> inv_freq_;
  std::vector<float> inv_freq_local_;  // of the sliding-window layers
  // Activations, [num_tokens, width], reused across steps.
  std::vector<float> residual_, normed_, qkv_, attn_, proj_, post_normed_, gate_up_, act_;
  std::vector<float> partial_out_, partial_max_, partial_sum_;
  std::vector<float> final_x_, final_residual_, final_normed_;
  kernels::cpu::HeadScreen head_screen_;
  std::vector<int32_t> argmax_;
  std::vector<int32_t> screened_;  // logit rows screened this step
  std::vector<float> screened_x_;
  std::vector<std::vector<int32_t>> candidates_;
  int64_t screened_rows_ = 0;
};

}  // namespace loom
