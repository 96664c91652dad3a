// The CPU backend: linear weights in the GGUF's ggml blocks (Q8_0, Q4_0, Q4_1)
// or else bfloat16 (dtype auto: decode is bound by weight bytes), bfloat16, or
// float32 (exact against float32 references), KV pool and
// activations in float32, kernels from kernels/cpu/ on the executor's own
// thread pool. One Execute() runs one batched forward over every sequence of
// the plan (prefill chunks and decodes mixed), then samples.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "model/executor.h"
#include "model/executor_factory.h"
#include "model/kv_layout.h"
#include "model/llama_forward.h"
#include "model/llama_forward_weights.h"
#include "model/model.h"
#include "model/sampler.h"

namespace loom {

class CpuExecutor final : public Executor {
 public:
  // The model must outlive the executor only for the config: weights are copied.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const LoadedModel& model,
                                                             const ExecutorOptions& options);

  ExecutorGeometry Geometry() const override;
  // Greedy rows whose token the head screening found, so far.
  int64_t ScreenedHeadRows() const { return forward_->screened_rows(); }
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;

  const LlamaWeights& weights() const { return weights_; }

 private:
  CpuExecutor(const ModelConfig& config, int32_t threads, LinearDType dtype);
  // Packs the plan into batch_; INTERNAL when the plan breaks its contract.
  absl::Status BuildBatch(const StepPlan& plan);
  // INTERNAL unless seq's slice and block table fit the pool and the layout:
  // only sliding pages before the window of the slice's first query may be
  // the null block.
  absl::Status CheckTable(const ScheduledSeq& seq) const;
  void AddPromptRows(const ScheduledSeq& seq, int32_t first_row);
  // Scores prompt_rows_ from the logits after the sampling rows.
  std::vector<PromptLogprobsChunk> ScorePromptRows() const;

  ModelConfig config_;
  LinearDType dtype_;  // kFloat32 or kBFloat16: what weights not kept quantized become
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  LlamaWeights weights_;
  std::unique_ptr<LlamaForward> forward_;
  ModelKvLayout kv_layout_;
  std::string kv_pool_;                 // ExecutorGeometry::kv_pool
  std::vector<bool> kv_sliding_entry_;  // per table entry of a logical block
  KvPool kv_;
  int32_t max_model_len_ = 0;
  ForwardBatch batch_;
  std::vector<const ScheduledSeq*> sample_seqs_;
  // Parallel to sample_seqs_ when the plan has token masks, else empty.
  std::vector<const uint32_t*> sample_masks_;
  // Logit rows past the sampling ones: prompt positions to score.
  struct PromptRow {
    const ScheduledSeq* seq;
    int32_t position;   // scores prompt token position + 1
    int32_t token_row;  // in the batch
  };
  std::vector<PromptRow> prompt_rows_;
  std::vector<float> logits_;
  SamplingRowLimits sampling_limits_;
  Sampler sampler_;
};

}  // namespace loom
