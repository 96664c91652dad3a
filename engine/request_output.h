// What the engine hands back for a request: per-step deltas pushed into the
// request's OutputSink, ending with one final message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "types/request_params.h"
#include "types/step.h"

namespace loom {

struct TokenLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;
  int32_t rank = 0;  // known for prompt tokens only; 0 otherwise
};

// New output of one of the n samples since the previous delta.
struct SampleDelta {
  uint32_t index = 0;
  std::vector<int32_t> token_ids;
  std::string text;  // never splits a UTF-8 character; held back while it may start a stop string
  std::vector<TokenLogprobs> logprobs;               // one per token when requested
  FinishReason finish_reason = FinishReason::kNone;  // set on this sample's last delta
  std::string stop_reason;                           // the stop string or token id that ended it
};

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_prompt_tokens = 0;
  double queue_seconds = 0;
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;
};

struct RequestOutput {
  std::vector<SampleDelta> samples;
  // When prompt logprobs were requested: set once, on the first output that
  // carries tokens, with one entry per prompt token after the first
  // (entries[i] is about prompt token i + 1).
  std::vector<TokenLogprobs> prompt_logprobs;
  int32_t first_prompt_token_id = 0;  // with prompt_logprobs
  // Set on the last output of the request. status is OK when every sample
  // finished (stop, length); otherwise it says why the request ended:
  // CANCELLED (aborted), DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (queue full),
  // INVALID_ARGUMENT, INTERNAL (engine failure).
  bool finished = false;
  absl::Status status;
  Usage usage;
};

// Implemented by the server's stream reactor. Push is called on the engine
// thread and must never block: the reactor buffers and coalesces.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void Push(RequestOutput output) = 0;
};

}  // namespace loom
