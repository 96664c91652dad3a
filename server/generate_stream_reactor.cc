#include "server/generate_stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/status_mapping.h"

namespace loom {

GenerateStreamReactor::GenerateStreamReactor(GenerationBackend& backend,
                                             const RpcRecorder& recorder, RequestParams params)
    : backend_(backend),
      recorder_(recorder),
      request_id_(params.request_id),
      coalescer_(params.request_id),
      sink_(std::make_shared<Sink>(this)) {
  absl::StatusOr<GenerationBackend::Handle> handle = backend_.Submit(std::move(params), sink_);
  if (handle.ok()) {
    handle_ = *handle;
    return;
  }
  LogLine(absl::StrCat("request ", request_id_, " rejected: ", handle.status().ToString()));
  {
    const std::lock_guard<std::mutex> lock(mu_);
    finish_called_ = true;
  }
  FinishWith(handle.status());
}

void GenerateStreamReactor::OnOutput(RequestOutput output) {
  Action action;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    coalescer_.Add(std::move(output));
    action = NextAction();
  }
  Perform(action);
}

void GenerateStreamReactor::OnWriteDone(bool ok) {
  Action action;
  {
    const std::lock_guard<std::mutex> lock(mu_);
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
  if (write_in_flight_ || finish_called_) {
    return Action::kNone;
  }
  if (coalescer_.has_pending() && !write_failed_) {
    in_flight_ = *coalescer_.TakeNext();
    write_in_flight_ = true;
    return Action::kWrite;
  }
  if (!coalescer_.finished()) {
    return Action::kNone;
  }
  finish_called_ = true;
  finish_status_ = coalescer_.final_status();
  if (!finish_status_.ok()) {
    LogLine(absl::StrCat("request ", request_id_, " aborted: ", finish_status_.ToString()));
  }
  return Action::kFinish;
}

void GenerateStreamReactor::Perform(Action action) {
  // The state machine guarantees this runs outside mu_ with no competing
  // StartWrite/Finish: the reactor cannot reach OnDone before Finish.
  switch (action) {
    case Action::kNone:
      return;
    case Action::kWrite:
      StartWrite(&in_flight_);
      return;
    case Action::kFinish: {
      absl::Status status;
      {
        const std::lock_guard<std::mutex> lock(mu_);
        status = finish_status_;
      }
      FinishWith(status);
      return;
    }
  }
}

void GenerateStreamReactor::FinishWith(const absl::Status& status) {
  if (recorder_) {
    recorder_("GenerateStream", status.code());
  }
  Finish(ToGrpcStatus(status));
}

void GenerateStreamReactor::OnCancel() {
  if (handle_.has_value()) {
    backend_.Abort(*handle_);
  }
}

void GenerateStreamReactor::OnDone() {
  sink_->Detach();
  delete this;
}

}  // namespace loom
