#include "server/generate_unary_reactor.h"

#include <utility>

#include "server/proto_convert.h"

namespace loom {

GenerateUnaryReactor::GenerateUnaryReactor(GenerationBackend& backend, const RpcRecorder& recorder,
                                           const ServiceOptions& options, RequestParams params,
                                           v1::GenerateResponse* response)
    : GenerateReactorBase("Generate", backend, recorder, options, params.request_id),
      response_(response) {
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
  if (absl::Status submitted = SubmitToBackend(std::move(params)); !submitted.ok()) {
    finished_ = true;
    FinishWith(submitted, Usage{});
  }
}

void GenerateUnaryReactor::OnOutput(RequestOutput output) {
  absl::Status status;
  {
    MutexLock lock(mu_);
    if (finished_) {
      return;
    }
    AppendToResponse(output, *response_);
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
    LogAborted(status);
  }
  FinishWith(status, output.usage);
}

}  // namespace loom
