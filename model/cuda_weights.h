// A Llama-family model's weights in device memory as bf16, laid out for the
// CUDA executor: q/k/v fused into one [q+k+v, hidden] matrix and gate/up into
// one [2 * inter, hidden] matrix, so that each costs one GEMM. Converted from
// any WeightStore format (GGUF dequantized) or, without a store, filled with
// random values on the device (load_format dummy).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

// Norm weights hold their effective scale: Gemma's 1 + w is added in float32
// before the bf16 rounding. Null pointers mark what the architecture lacks.
struct CudaLayerWeights {
  __nv_bfloat16* input_norm = nullptr;      // [hidden]
  __nv_bfloat16* qkv = nullptr;             // [(heads + 2 * kv_heads) * head_dim, hidden]
  __nv_bfloat16* qkv_bias = nullptr;        // [(heads + 2 * kv_heads) * head_dim] or null
  __nv_bfloat16* q_norm = nullptr;          // [head_dim] (q/k norm) or null
  __nv_bfloat16* k_norm = nullptr;          // [head_dim] (q/k norm) or null
  __nv_bfloat16* o = nullptr;               // [hidden, heads * head_dim]
  __nv_bfloat16* post_attn_norm = nullptr;  // [hidden] (sandwich norms) or null
  __nv_bfloat16* mlp_norm = nullptr;        // [hidden]
  __nv_bfloat16* gate_up = nullptr;         // [2 * inter, hidden]
  __nv_bfloat16* down = nullptr;            // [hidden, inter]
  __nv_bfloat16* post_mlp_norm = nullptr;   // [hidden] (sandwich norms) or null
};

class CudaWeights {
 public:
  // From a store; INVALID_ARGUMENT / NOT_FOUND when a tensor is missing or misshapen.
  static absl::StatusOr<std::unique_ptr<CudaWeights>> Load(const ModelConfig& config,
                                                           const WeightStore& store);
  // Random weights U(-1/sqrt(in), 1/sqrt(in)), norms 1, generated on the device.
  static absl::StatusOr<std::unique_ptr<CudaWeights>> Dummy(const ModelConfig& config,
                                                            uint64_t seed);
  ~CudaWeights();
  CudaWeights(const CudaWeights&) = delete;
  CudaWeights& operator=(const CudaWeights&) = delete;

  const std::vector<CudaLayerWeights>& layers() const { return layers_; }
  const __nv_bfloat16* embed() const { return embed_; }
  const __nv_bfloat16* final_norm() const { return final_norm_; }
  const __nv_bfloat16* lm_head() const { return lm_head_; }
  int64_t bytes() const { return bytes_; }

 private:
  explicit CudaWeights(const ModelConfig& config);
  absl::Status Allocate();

  ModelConfig config_;
  void* base_ = nullptr;
  int64_t bytes_ = 0;
  std::vector<CudaLayerWeights> layers_;
  __nv_bfloat16* embed_ = nullptr;
  __nv_bfloat16* final_norm_ = nullptr;
  __nv_bfloat16* lm_head_ = nullptr;  // == embed_ when tied
};

}  // namespace loom
