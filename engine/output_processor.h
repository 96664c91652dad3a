// Turns the scheduler's per-step token output into what clients see: per-sample
// incremental detokenization, stop-string matching, and one RequestOutput per
// request and step pushed into the request's sink (vLLM v1's OutputProcessor).
// Runs on the engine thread only.
//
// How a sample ends, as SampleDelta reports it:
//   stop string      kStop, stop_reason = the string; text cut before it (after
//                    it with include_stop_str_in_output); the token is counted.
//   stop_token_ids   kStop, stop_reason = the id in decimal; the token is in
//                    token_ids but its text only with include_stop_str_in_output.
//   EOS              kStop, stop_reason empty; EOS is special, so no text.
//   constraint done  kStop, stop_reason empty: the token completed the
//                    structured-output constraint and nothing can follow;
//                    its text is output.
//   max_tokens /     kLength, stop_reason empty; text held back for a possible
//   max_model_len    stop string is released.
//
// The scheduler owns when a sample ends: it applies the token rules itself
// and takes the one rule that needs text, a matched stop string, through
// Scheduler::FinishSeq. This class only reports those matches
// (StepOutcome::stop_string_ends) and never calls the scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine_observer.h"
#include "engine/request_id.h"
#include "engine/request_output.h"
#include "engine/stop_string_matcher.h"
#include "scheduler/scheduler.h"
#include "types/detokenizer.h"

namespace loom {

// One sample of a request, by scheduler handle.
struct SampleRef {
  RequestHandle handle = 0;
  uint32_t index = 0;
};

class OutputProcessor {
 public:
  // observer may be null.
  OutputProcessor(std::shared_ptr<const Detokenizer> detokenizer, EngineObserver* observer);

  void set_observer(EngineObserver* observer) { observer_ = observer; }

  // Starts tracking a request that the scheduler accepted as `handle`; `id` is
  // the engine's id for it.
  void Add(RequestId id, RequestHandle handle, const RequestParams& params,
           std::shared_ptr<OutputSink> sink);

  // The scheduler handle of a tracked request.
  [[nodiscard]] std::optional<RequestHandle> FindHandle(RequestId id) const;

  struct StepOutcome {
    int32_t num_finished = 0;               // requests whose final output was pushed
    int64_t num_started_prompt_tokens = 0;  // prompts scheduled for the first time
    // Samples that a stop string ended in this step and that the scheduler
    // still runs, in token order: the caller ends each with
    // Scheduler::FinishSeq(handle, index, FinishReason::kStop).
    std::vector<SampleRef> stop_string_ends;
  };

  // Applies one step: new tokens become text, a matched stop string ends its
  // sample's output, and each request that progressed gets one output (the
  // final one once all its samples have finished).
  StepOutcome ProcessStep(const UpdateOutput& update, absl::Time now);

  // Ends a request early with a non-OK status (CANCELLED, DEADLINE_EXCEEDED,
  // INTERNAL, ...): its unfinished samples are reported ABORTED in a final
  // output. The scheduler must already have dropped it. False when untracked.
  bool Fail(RequestHandle handle, const absl::Status& status, absl::Time now);

  [[nodiscard]] std::vector<RequestHandle> handles() const;

 private:
  struct Sample {
    Sample(std::unique_ptr<StreamDecoder> decoder, StopStringMatcher matcher)
        : decoder(std::move(decoder)), matcher(std::move(matcher)) {}

    std::unique_ptr<StreamDecoder> decoder;
    StopStringMatcher matcher;
    int32_t num_tokens = 0;
    absl::Time last_token_time;
    bool finished = false;
    bool length_limited = false;
  };

  struct Request {
    RequestId id;
    std::shared_ptr<OutputSink> sink;
    StoppingParams stopping;
    bool want_logprobs = false;
    // Filled by position as the prompt is computed (a recomputation after
    // preemption overwrites), handed out with the first token.
    std::vector<TokenLogprobs> prompt_logprobs;
    bool prompt_logprobs_pending = false;
    int32_t first_prompt_token_id = 0;
    absl::Time arrival_time;
    std::string tenant;  // for the observer's counters
    std::optional<absl::Time> first_token_time;
    std::vector<Sample> samples;
    int32_t num_unfinished = 0;
    Usage usage;
  };

  // Appends one token to its sample's delta in `output`; a stop string that
  // the scheduler has not already ended the sample for goes to
  // stop_string_ends.
  void AppendToken(Request& request, const NewToken& token, const FinishedSeq* finish,
                   absl::Time now, RequestOutput& output, std::vector<SampleRef>& stop_string_ends);
  void StorePromptLogprobs(const PromptLogprobsUpdate& update);
  static SampleDelta& DeltaFor(RequestOutput& output, uint32_t index);
  static void EndSample(Request& request, Sample& sample, SampleDelta& delta, FinishReason reason,
                        std::string stop_reason);
  // Pushes the final output and stops tracking the request.
  void Finish(RequestHandle handle, RequestOutput output, const absl::Status& status,
              FinishLabel label, absl::Time now);

  std::shared_ptr<const Detokenizer> detokenizer_;
  EngineObserver* observer_;
  absl::flat_hash_map<RequestHandle, Request> requests_;  // by scheduler handle
  absl::flat_hash_map<RequestId, RequestHandle> handle_of_id_;
  std::vector<double> inter_token_seconds_;  // reused across steps
};

}  // namespace loom
