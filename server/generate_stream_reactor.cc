#include "server/generate_stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/log.h"

namespace loom {

GenerateStreamReactor::GenerateStreamReactor(GenerationBackend& backend,
                                             const RpcRecorder& recorder,
                                             const ServiceOptions& options,
                                             StreamWatchdog& watchdog, RequestParams params)
    : GenerateReactorBase("GenerateStream", backend, recorder, options, params.request_id),
      coalescer_(params.request_id) {
  {
    // OnOutput may run as soon as the request is submitted; it waits for the
    // constructor. Until the handler returns, StartWrite and Finish only record
    // what the reactor wants, so holding mu_ here cannot re-enter it.
    MutexLock lock(mu_);
    Submit(watchdog, std::move(params));
  }
  ReactorRelease();
}

void GenerateStreamReactor::Submit(StreamWatchdog& watchdog, RequestParams params) {
  if (absl::Status submitted = SubmitToBackend(std::move(params)); !submitted.ok()) {
    finish_called_ = true;
    FinishWith(submitted, Usage{});
    return;
  }
  watchdog.Watch([sink = std::weak_ptr<Sink>(sink_)](absl::Time now) {
    const std::shared_ptr<Sink> locked = sink.lock();
    GenerateStreamReactor* overflowed = nullptr;
    const bool alive = locked != nullptr && locked->Visit([&](GenerateStreamReactor& reactor) {
      if (reactor.CheckBuffer(now)) overflowed = &reactor;
    });
    if (overflowed != nullptr) {
      overflowed->AbortOverflowed();
      return false;
    }
    return alive;
  });
}

void GenerateStreamReactor::OnOutput(RequestOutput output) {
  Action action;
  {
    MutexLock lock(mu_);
    coalescer_.Add(std::move(output));
    action = NextAction();
  }
  Perform(action);
}

void GenerateStreamReactor::OnWriteDone(bool ok) {
  ReactorAcquire();  // the first write may come from the constructor
  Action action;
  {
    MutexLock lock(mu_);
    write_in_flight_ = false;
    // A failed write means the client is gone; OnCancel aborts the request and
    // the call finishes once the engine confirms with its final output.
    if (!ok) {
      write_failed_ = true;
    }
    action = NextAction();
  }
  Perform(action);
}

GenerateStreamReactor::Action GenerateStreamReactor::NextAction() {
  if (write_in_flight_ || write_issuing_ || finish_called_) {
    return Action::kNone;
  }
  if (coalescer_.has_pending() && !write_failed_) {
    in_flight_ = *coalescer_.TakeNext();
    in_flight_bytes_ = static_cast<int64_t>(in_flight_.ByteSizeLong());
    write_in_flight_ = true;
    write_issuing_ = true;
    return Action::kWrite;
  }
  if (!coalescer_.finished()) {
    return Action::kNone;
  }
  finish_called_ = true;
  finish_status_ = coalescer_.final_status();
  if (!finish_status_.ok()) {
    LogAborted(finish_status_);
  }
  return Action::kFinish;
}

void GenerateStreamReactor::Perform(Action action) {
  // The state machine guarantees this runs outside mu_ with no competing
  // StartWrite/Finish: while a write is being issued (write_issuing_) nothing
  // else may finish the call, so the reactor cannot reach OnDone under us; the
  // issuing thread then decides the next step itself.
  while (action != Action::kNone) {
    if (action == Action::kWrite) {
      ReactorRelease();
      StartWrite(&in_flight_);
      MutexLock lock(mu_);
      write_issuing_ = false;
      action = NextAction();
      continue;
    }
    absl::Status status;
    Usage usage;
    {
      MutexLock lock(mu_);
      status = finish_status_;
      usage = coalescer_.usage();
    }
    FinishWith(status, usage);
    return;
  }
}

bool GenerateStreamReactor::CheckBuffer(absl::Time now) {
  MutexLock lock(mu_);
  // A write being issued must reach gRPC before Finish; the next tick retries.
  if (finish_called_ || write_issuing_) {
    return false;
  }
  const int64_t buffered = coalescer_.pending_bytes() + (write_in_flight_ ? in_flight_bytes_ : 0);
  if (buffered <= options_.max_stream_buffer_bytes) {
    over_since_.reset();
    return false;
  }
  if (!over_since_.has_value()) {
    over_since_ = now;
    return false;
  }
  if (now - *over_since_ < options_.stream_buffer_grace) {
    return false;
  }
  finish_called_ = true;
  coalescer_.Clear();
  finish_status_ = absl::ResourceExhaustedError(absl::StrCat(
      "the stream's unsent output stayed over --max_stream_buffer_bytes=",
      options_.max_stream_buffer_bytes,
      " for --stream_buffer_grace=", absl::FormatDuration(options_.stream_buffer_grace),
      " (the client is not reading); got ", buffered, " bytes"));
  return true;
}

void GenerateStreamReactor::AbortOverflowed() {
  absl::Status status;
  {
    MutexLock lock(mu_);
    status = finish_status_;
  }
  LogAborted(status);
  if (handle_.has_value()) {
    backend_.Abort(*handle_);
  }
  FinishWith(status, Usage{});
}

}  // namespace loom
