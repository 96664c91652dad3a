// The Llama-family forward pass on the GPU over a packed step (prefill chunks
// and decodes mixed): embedding, per layer RMSNorm -> fused QKV GEMM (-> q/k
// norm) -> RoPE + KV write -> paged attention (sliding-window layers masked)
// -> O GEMM (-> post-attention norm) -> residual RMSNorm -> fused gate/up GEMM
// -> SiLU or GELU-tanh * up -> down GEMM (-> post-MLP norm), then the final
// norm and the LM head on the rows that sample. Every buffer is allocated
// once, so a run can be graph-captured.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention_v2.h"
#include "kernels/cuda/gemm.h"
#include "kernels/paged_kv.h"
#include "model/config.h"
#include "model/cuda_weights.h"
#include "model/kv_cache_sizing.h"
#include "model/kv_layout.h"

namespace loom {

// Device pointers to one step's inputs (kernels/paged_kv.h has their meaning).
struct CudaStepInputs {
  const int32_t* token_ids = nullptr;     // [num_tokens]
  const int32_t* positions = nullptr;     // [num_tokens]
  const int32_t* slot_mapping = nullptr;  // [num_entries][slot_pitch]
  const int32_t* query_start = nullptr;   // [num_seqs + 1]
  const int32_t* block_tables = nullptr;  // [num_seqs, block_table_width] table entries
  int32_t num_entries = 1;                // table entries per logical block
  int32_t slot_pitch = 0;                 // from one entry's slot_mapping to the next's
  const int32_t* sample_rows = nullptr;   // [num_sample_rows], token rows whose logits are needed
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_sample_rows = 0;
  int32_t block_table_width = 0;  // columns of block_tables, <= the limits' max_model_len's
  int32_t partition_size = 0;     // split-K decode attention; 0 = one pass per token
  int32_t max_partitions = 0;     // split-K workspace stride (kernels::PlanSplitK)
};

struct CudaForwardLimits {
  int32_t max_tokens = 0;  // per step
  int32_t max_seqs = 0;
  int32_t max_model_len = 0;
  int32_t block_size = 16;
  int32_t num_blocks = 0;  // KV pool, block 0 included
  // Decode steps run this kernel; prefill and mixed steps always run v1.
  kernels::cuda::AttentionKernel attention_kernel = kernels::cuda::AttentionKernel::kV1;
};

class CudaForward {
 public:
  // Allocates activations, the attention workspace and the KV pool;
  // RESOURCE_EXHAUSTED or INTERNAL when the device refuses.
  static absl::StatusOr<std::unique_ptr<CudaForward>> Create(const ModelConfig& config,
                                                             const ModelKvLayout& kv_layout,
                                                             const CudaWeights& weights,
                                                             const CudaForwardLimits& limits);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // Enqueues the forward pass; logits() then holds [num_sample_rows, vocab] fp32.
  // INVALID_ARGUMENT for inputs past the limits, INTERNAL for a failed launch.
  absl::Status Run(const CudaStepInputs& in, cudaStream_t stream);
  float* logits() const { return logits_; }
  // GEMM shapes first run while this is > 1 time that many cuBLASLt candidates.
  void set_gemm_algorithms_timed(int32_t n) { gemm_.set_algorithms_timed(n); }

  // Device bytes the activations and workspace need for these limits (no KV).
  static int64_t ActivationBytes(const ModelConfig& config, const CudaForwardLimits& limits);
  static int64_t KvBytesPerBlock(const ModelConfig& config, const ModelKvLayout& kv_layout,
                                 int32_t block_size);
  // The pool's geometry for the shared sizing functions (model/kv_cache_sizing.h):
  // a block holds layers_per_page layers.
  static KvCacheSpec KvSpec(const ModelConfig& config, const ModelKvLayout& kv_layout,
                            int32_t block_size);

 private:
  CudaForward(const ModelConfig& config, const ModelKvLayout& kv_layout, const CudaWeights& weights,
              const CudaForwardLimits& limits);
  absl::Status Allocate();
  template <typename T>
  absl::Status Alloc(T*& out, int64_t elems);
  // One layer; `pending` is the previous layer's output to add into the
  // residual (null for layer 0), and becomes this layer's.
  absl::Status RunLayer(const CudaLayerWeights& w, int32_t layer,
                        kernels::PagedKv<__nv_bfloat16>& kv, const CudaStepInputs& in,
                        const __nv_bfloat16*& pending, cudaStream_t stream);
  // normed_ -> fused qkv (q/k normed) -> RoPE and KV write -> attention into attn_.
  absl::Status RunAttention(const CudaLayerWeights& w, int32_t layer,
                            kernels::PagedKv<__nv_bfloat16>& kv, const CudaStepInputs& in,
                            cudaStream_t stream);

  ModelConfig config_;
  ModelKvLayout kv_layout_;
  const CudaWeights& weights_;
  CudaForwardLimits limits_;
  int64_t workspace_rows_ = 0;  // split-K rows per query head
  cuda::Gemm gemm_;
  std::vector<void*> allocations_;
  __nv_bfloat16 *residual_ = nullptr, *normed_ = nullptr, *x_ = nullptr, *qkv_ = nullptr;
  __nv_bfloat16 *attn_ = nullptr, *gate_up_ = nullptr, *act_ = nullptr, *gathered_ = nullptr;
  __nv_bfloat16* post_normed_ = nullptr;  // sandwich norms' outputs
  float* logits_ = nullptr;
  float *partial_out_ = nullptr, *partial_max_ = nullptr, *partial_sum_ = nullptr;
  float* inv_freq_ = nullptr;
  float* inv_freq_local_ = nullptr;  // the sliding-window layers' RoPE
  // [layers_per_page][2][num_blocks][kv_heads][block_size][head_dim]
  __nv_bfloat16* kv_pool_ = nullptr;
};

}  // namespace loom
