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
    if (!output.prompt_logprobs.empty()) {
      AppendLogprobs(output.prompt_logprobs, *response_->mutable_prompt_logprobs());
      response_->set_first_prompt_token_id(output.first_prompt_token_id);
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
    LogAborted(status);
  }
  FinishWith(status, output.usage);
}

}  // namespace loom
