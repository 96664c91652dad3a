// The CUDA backend of Executor: bf16 weights and KV pool on one GPU, cuBLASLt
// GEMMs, fused kernels, GPU sampling. Pure-decode steps replay a CUDA graph
// captured per padded batch size (1, 2, 4, ... max_num_seqs); mixed steps run
// eagerly. Each step's inputs are packed into one pinned host buffer and
// uploaded with one copy; the sampled tokens come back with one copy.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cuda/attention_v2.h"
#include "model/config.h"
#include "model/executor.h"
#include "model/executor_factory.h"
#include "model/model.h"
#include "model/weights.h"
#include "types/sampling_params.h"

namespace loom {

struct CudaExecutorOptions {
  int32_t block_size = 16;
  int32_t max_model_len = 0;  // 0: the LoadedModel's
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  // Share of the device memory left after weights and activations given to the KV pool.
  float kv_cache_memory_fraction = 0.9f;
  int64_t kv_cache_bytes = 0;  // > 0: the KV pool's size, overriding the fraction
  int32_t max_num_blocks = 0;  // 0: no cap
  bool enforce_eager = false;  // no CUDA graphs
  int32_t max_top_logprobs = kMaxTopLogprobs;
  int32_t max_logit_bias = 1024;  // entries per request
  uint64_t dummy_seed = 0;        // random weights when the model carries no WeightStore
  // Decode attention kernel (--attention_kernel); prefill and mixed steps use v1.
  kernels::cuda::AttentionKernel attention_kernel = kernels::cuda::AttentionKernel::kV1;
  // cuBLASLt heuristic algorithms timed per GEMM shape during start-up (the
  // graph warm-up), keeping the fastest; 0 or 1 takes the heuristic's first.
  int32_t gemm_algorithms_timed = 8;
};

// --attention_kernel's value: auto and v1 give v1, v2 gives v2; anything else
// is INVALID_ARGUMENT naming the flag and the allowed values.
absl::StatusOr<kernels::cuda::AttentionKernel> ParseAttentionKernel(absl::string_view value);

// True when a CUDA device of compute capability >= 8.0 answers.
bool CudaDeviceUsable();

// Weights come from model.weights, or are random (generated on the device)
// when model.weights is null (load_format dummy).
absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const LoadedModel& model,
                                                             const CudaExecutorOptions& options);

// The engine's options mapped onto CudaExecutorOptions: the per-step limits
// and max_logit_bias carry over; INVALID_ARGUMENT unless dtype is auto or
// bfloat16.
absl::StatusOr<CudaExecutorOptions> CudaOptionsFrom(const ExecutorOptions& options);

// CreateCudaExecutor over CudaOptionsFrom(options).
absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const LoadedModel& model,
                                                             const ExecutorOptions& options);

class CudaExecutorImpl;

// The concrete executor, for benchmarks that switch graphs on and off.
class CudaExecutor : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const ModelConfig& config,
                                                              const WeightStore* weights,
                                                              int32_t max_model_len,
                                                              const CudaExecutorOptions& options);
  ~CudaExecutor() override;

  ExecutorGeometry Geometry() const override;
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;

  // Pure-decode steps replay graphs while this is on (default: !enforce_eager).
  void set_use_graphs(bool on);
  int64_t weight_bytes() const;

 private:
  explicit CudaExecutor(std::unique_ptr<CudaExecutorImpl> impl);
  std::unique_ptr<CudaExecutorImpl> impl_;
};

}  // namespace loom
