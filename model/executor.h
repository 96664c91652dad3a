// The interface every backend implements: one batched forward pass (prefill
// chunks and decodes mixed) over the paged KV cache, then sampling.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "types/kv_cache_layout.h"
#include "types/step.h"

namespace loom {

// What the executor can hold, reported once so that the engine can size the
// block pool: the executor has already allocated num_blocks KV blocks.
struct ExecutorGeometry {
  int32_t num_blocks = 0;  // including block 0, the null block
  int32_t block_size = 16;
  int32_t max_model_len = 0;
  std::string device;  // "cpu" or "cuda"
  std::string dtype;   // "float32", "bfloat16", ...
  // Per-step limits the executor was sized for; 0: none. The scheduler's
  // budgets must fit them (Engine::Start checks).
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  // Whether Execute honours ScheduledSeq::num_prompt_logprobs; the engine
  // refuses requests for prompt logprobs otherwise.
  bool prompt_logprobs = false;
  // Logits per sampled row; 0: unknown. A constrained request's token masks
  // must cover exactly this many tokens (Engine::Submit checks).
  int32_t vocab_size = 0;
  // How the layers share block tables (types/kv_cache_layout.h); the plans'
  // block tables follow it.
  KvCacheLayout kv_layout;
  // How the KV pool's size and dtype were chosen, for the start-up log;
  // empty when the executor says nothing.
  std::string kv_pool;
  // Which weights dtype does not describe (linear weights kept in ggml
  // blocks), for the start-up log; empty when none.
  std::string weight_formats;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual ExecutorGeometry Geometry() const = 0;
  // Runs one step. A failure is an engine failure: the engine fails every
  // in-flight request with INTERNAL.
  virtual absl::StatusOr<StepResult> Execute(const StepPlan& plan) = 0;
  // Thread-safe. Grows while a step advances inside (the CPU executor: once a
  // layer), so that the engine's liveness can tell a long step, such as an 8k
  // token prefill on the CPU, from a hung one.
  [[nodiscard]] virtual uint64_t progress() const {
    return progress_.load(std::memory_order_relaxed);
  }

 protected:
  void NoteProgress() { progress_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> progress_{0};
};

}  // namespace loom
