#include "server/generate_unary_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/access_log.h"
#include "server/log.h"
#include "server/proto_convert.h"
#include "server/status_mapping.h"

namespace loom {

GenerateUnaryReactor::GenerateUnaryReactor(GenerationBackend& backend, const RpcRecorder& recorder,
                                           const ServiceOptions& options, RequestParams params,
                                           v1::GenerateResponse* response)
    : backend_(backend),
      recorder_(recorder),
      options_(options),
      request_id_(params.request_id),
      response_(response),
      sink_(std::make_shared<Sink>(this)) {
  {
    // OnOutput may run as soon as the request is submitted; it waits for the
    // constructor. Until the handler returns, Finish only records the status,
    // so holding mu_ here cannot re-enter it.
    MutexLock lock(mu_);
    Submit(std::move(params));
  }
  ReactorRelease();
}

void GenerateUnaryReactor::Submit(RequestParams params) {
  response_->set_request_id(request_id_);
  for (int32_t i = 0; i < params.n; ++i) {
    response_->add_completions()->set_index(i);
  }
  absl::StatusOr<GenerationBackend::Handle> handle = backend_.Submit(std::move(params), sink_);
  if (handle.ok()) {
    handle_ = *handle;
    return;
  }
  LogLine(absl::StrCat("request ", request_id_, " rejected: ", handle.status().ToString()));
  finished_ = true;
  FinishWith(handle.status(), Usage{});
}

void GenerateUnaryReactor::OnOutput(RequestOutput output) {
  absl::Status status;
  {
    MutexLock lock(mu_);
    if (finished_) {
      return;
    }
    for (const SampleDelta& delta : output.samples) {
      if (delta.index >= static_cast<uint32_t>(response_->completions_size())) {
        continue;
      }
      v1::Completion& completion = *response_->mutable_completions(static_cast<int>(delta.index));
      for (int32_t id : delta.token_ids) {
        completion.add_token_ids(id);
      }
      completion.mutable_text()->append(delta.text);
      AppendLogprobs(delta.logprobs, *completion.mutable_logprobs());
      if (delta.finish_reason != FinishReason::kNone) {
        completion.set_finish_reason(ToProtoFinishReason(delta.finish_reason));
        completion.set_stop_reason(delta.stop_reason);
      }
    }
    if (!output.finished) {
      return;
    }
    finished_ = true;
    status = std::move(output.status);
    if (status.ok()) {
      CopyUsage(output.usage, *response_->mutable_usage());
    }
  }
  if (!status.ok()) {
    LogLine(absl::StrCat("request ", request_id_, " aborted: ", status.ToString()));
  }
  FinishWith(status, output.usage);
}

void GenerateUnaryReactor::FinishWith(const absl::Status& status, const Usage& usage) {
  if (recorder_) {
    recorder_("Generate", status.code());
  }
  LogAccess(options_.access_log, request_id_, "Generate", status, usage);
  grpc::Status grpc_status = ToGrpcStatus(status);
  ReactorRelease();
  Finish(std::move(grpc_status));
}

void GenerateUnaryReactor::OnCancel() {
  ReactorAcquire();
  const std::optional<GenerationBackend::Handle> handle = handle_;
  GenerationBackend& backend = backend_;
  // The abort may finish the call, after which OnDone may run at any time.
  ReactorRelease();
  if (handle.has_value()) {
    backend.Abort(*handle);
  }
}

void GenerateUnaryReactor::OnDone() {
  ReactorAcquire();
  sink_->Detach();
  // A callback that returned without finishing released mu_ last.
  { MutexLock lock(mu_); }
  delete this;
}

}  // namespace loom
