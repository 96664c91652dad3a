// Per-event hooks for metrics (latency histograms, request counters). The
// metrics code implements this; the engine calls it on its own thread, so an
// implementation must be quick and must not call back into the engine.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "engine/request_output.h"

namespace loom {

// How a request ended: the finish_reason label of loom_requests_total.
enum class FinishLabel { kStop, kLength, kAborted, kError, kDeadline, kRejected };

std::string_view FinishLabelName(FinishLabel label);

// The label of a request that ended with a non-OK status: CANCELLED is
// aborted, DEADLINE_EXCEEDED deadline, RESOURCE_EXHAUSTED rejected, the rest error.
FinishLabel FinishLabelFor(const absl::Status& status);

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;

  // Once per request, when its final output has been pushed. usage carries the
  // token counts and latencies (zero for requests that never ran); tenant is
  // RequestParams::tenant (empty without one).
  virtual void OnRequestFinished(FinishLabel label, const Usage& usage,
                                 std::string_view tenant) = 0;

  // Once per executed step.
  virtual void OnStep(double step_seconds, int32_t batch_seqs, int32_t batch_tokens) = 0;

  // Once per step: the time between consecutive tokens of a sample, for every
  // sample that got a token other than its first in this step.
  virtual void OnInterTokenLatencies(std::span<const double> seconds) = 0;
};

}  // namespace loom
