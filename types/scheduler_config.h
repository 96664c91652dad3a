// The scheduler's configuration: batch and token budgets, policies and the
// EOS ids. Plain data, so that the engine's and the server's configuration can
// carry it without seeing the scheduler.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace loom {

enum class SchedulingPolicy { kFcfs, kPriority, kShortestPrompt };
enum class AdmissionPolicy { kOptimistic, kReserve };

// The fewest prompt tokens a step with running decodes may take under a
// step-time target, so that prompts still progress when the decodes alone
// take the target.
inline constexpr int32_t kMinPrefillTokensPerStep = 32;

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // sequences per step (batch slots)
  int32_t max_num_batched_tokens = 8192;  // token budget per step
  int32_t max_model_len = 0;              // required; capped to the pool's capacity
  int32_t max_queued_requests = 1024;     // waiting sequences beyond this: RESOURCE_EXHAUSTED
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  AdmissionPolicy admission = AdmissionPolicy::kOptimistic;
  int32_t long_prefill_token_threshold = 0;  // most tokens of one prefill chunk; 0 = no cap
  // Sequences that may compute a prefill chunk leaving part of their prompt
  // for later, in one step (vLLM's max_num_partial_prefills); 0 = no limit.
  // With the threshold it bounds the long-prompt work a step adds to the
  // decodes that share it.
  int32_t max_num_partial_prefills = 0;
  // A step-time target in milliseconds for steps where prompt chunks share
  // the step with running decodes: the prompt tokens of such a step are
  // capped at what the measured step cost (scheduler/step_cost.h) fits in
  // the target less the decodes, at least kMinPrefillTokensPerStep. 0: no
  // target.
  double max_step_ms = 0.0;
  std::vector<int32_t> eos_token_ids;
  // Priority policy: waiting this long is worth one priority level. Positive.
  absl::Duration priority_aging = absl::Seconds(1);
  // Shortest-prompt policy: waiting this long is worth one prompt token
  // (about the time one token of prefill takes). Positive.
  absl::Duration prompt_token_aging = absl::Milliseconds(2);
};

}  // namespace loom
