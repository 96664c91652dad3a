// The GenerateStream call: submits the request to the engine and relays its
// outputs. At most one write is in flight; outputs arriving meanwhile are
// coalesced (StreamCoalescer) and OnWriteDone starts the next write, so the
// engine thread never waits for a client. A cancelled call aborts the request
// in the engine; the reactor frees itself in OnDone. A stream whose unsent
// output stays over ServiceOptions::max_stream_buffer_bytes for the grace
// period (checked by the StreamWatchdog) is aborted in the engine and ends with
// RESOURCE_EXHAUSTED.
#pragma once

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "grpcpp/support/server_callback.h"
#include "loom/v1/generation.pb.h"
#include "server/generate_reactor_base.h"
#include "server/generation_backend.h"
#include "server/rpc_recorder.h"
#include "server/service_options.h"
#include "server/stream_coalescer.h"
#include "server/stream_watchdog.h"
#include "types/request_params.h"

namespace loom {

class GenerateStreamReactor final
    : public GenerateReactorBase<GenerateStreamReactor,
                                 grpc::ServerWriteReactor<v1::GenerateStreamResponse>> {
 public:
  // Submits params to backend; on a submit error the call finishes at once.
  // options and watchdog must outlive the call.
  GenerateStreamReactor(GenerationBackend& backend, const RpcRecorder& recorder,
                        const ServiceOptions& options, StreamWatchdog& watchdog,
                        RequestParams params);

  void OnWriteDone(bool ok) override;

 private:
  friend Sink;

  // What to do next, decided under mu_ and carried out after releasing it.
  enum class Action { kNone, kWrite, kFinish };
  Action NextAction() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Perform(Action action);
  // The constructor's work: submits params and registers with the watchdog,
  // or finishes at once on a submit error.
  void Submit(StreamWatchdog& watchdog, RequestParams params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnOutput(RequestOutput output);
  // From the watchdog, under the sink's lock: true once the buffer has stayed
  // over the cap for the grace period; the call is then marked finished and
  // the caller must AbortOverflowed() after releasing the sink's lock (the
  // backend may push the final output synchronously). The reactor stays alive
  // until then: it cannot reach OnDone before Finish.
  bool CheckBuffer(absl::Time now);
  void AbortOverflowed();

  StreamCoalescer coalescer_ ABSL_GUARDED_BY(mu_);
  // The message being written; untouched from StartWrite until OnWriteDone.
  v1::GenerateStreamResponse in_flight_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // From deciding a write until its StartWrite has returned: no Finish may
  // overtake it, so neither NextAction nor the watchdog finishes meanwhile.
  bool write_issuing_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Since when the buffered output has been over the cap, as the watchdog saw.
  std::optional<absl::Time> over_since_ ABSL_GUARDED_BY(mu_);
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom
