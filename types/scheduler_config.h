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
  std::vector<int32_t> eos_token_ids;
  // Priority policy: waiting this long is worth one priority level. Positive.
  absl::Duration priority_aging = absl::Seconds(1);
  // Shortest-prompt policy: waiting this long is worth one prompt token
  // (about the time one token of prefill takes). Positive.
  absl::Duration prompt_token_aging = absl::Milliseconds(2);
};

}  // namespace loom
