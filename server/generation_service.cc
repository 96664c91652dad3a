#include "server/generation_service.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/access_log.h"
#include "server/generate_stream_reactor.h"
#include "server/generate_unary_reactor.h"
#include "server/grpc_auth.h"
#include "server/log.h"
#include "server/reactor_sink.h"
#include "server/status_mapping.h"

namespace loom {
namespace {

// A stream that fails before it starts: finishes at once, frees itself.
class FailedStreamReactor final : public grpc::ServerWriteReactor<v1::GenerateStreamResponse> {
 public:
  // Until the handler returns Finish only records the status (reactor_sink.h
  // on the release and acquire).
  explicit FailedStreamReactor(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
    ReactorRelease();
  }
  void OnDone() override {
    ReactorAcquire();
    delete this;
  }
};

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  // gRPC reports "no deadline" as the largest time_point, beyond absl's range.
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// How often each stream's buffered output is looked at: a few times per grace
// period, at most every 100 ms.
absl::Duration WatchInterval(absl::Duration grace) {
  return std::clamp(grace / 4, absl::Milliseconds(5), absl::Milliseconds(100));
}

}  // namespace

GenerationService::GenerationService(const ModelFrontend& model, GenerationBackend& backend,
                                     RpcRecorder recorder, const ServiceOptions& options)
    : model_(model),
      backend_(backend),
      recorder_(std::move(recorder)),
      options_(options),
      intake_(model, options.limits, options.generation_defaults, options.structured_outputs),
      watchdog_(WatchInterval(options.stream_buffer_grace)) {}

grpc::ServerUnaryReactor* GenerationService::FinishUnary(grpc::CallbackServerContext* context,
                                                         std::string_view method,
                                                         const absl::Status& status) {
  if (recorder_) {
    recorder_(method, status.code());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::StatusOr<Caller> GenerationService::Authenticate(
    const grpc::CallbackServerContext& context) const {
  return AuthenticateCall(options_.api_keys, context);
}

absl::StatusOr<RequestParams> GenerationService::Prepare(const grpc::CallbackServerContext& context,
                                                         const v1::GenerateRequest& request) {
  absl::StatusOr<Caller> caller = Authenticate(context);
  if (!caller.ok()) {
    return caller.status();
  }
  return intake_.Prepare(request, DeadlineOf(context), *caller);
}

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                      const v1::GenerateRequest* request,
                                                      v1::GenerateResponse* response) {
  absl::StatusOr<RequestParams> params = Prepare(*context, *request);
  if (!params.ok()) {
    LogAccess(options_.access_log, request->request_id(), "Generate", params.status(), Usage{});
    return FinishUnary(context, "Generate", params.status());
  }
  return new GenerateUnaryReactor(backend_, recorder_, options_, *std::move(params), response);
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  absl::StatusOr<RequestParams> params = Prepare(*context, *request);
  if (!params.ok()) {
    if (recorder_) {
      recorder_("GenerateStream", params.status().code());
    }
    LogAccess(options_.access_log, request->request_id(), "GenerateStream", params.status(),
              Usage{});
    return new FailedStreamReactor(params.status());
  }
  return new GenerateStreamReactor(backend_, recorder_, options_, watchdog_, *std::move(params));
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(*context); !caller.ok()) {
    return FinishUnary(context, "Tokenize", caller.status());
  }
  absl::StatusOr<std::vector<int32_t>> ids = intake_.Tokenize(*request);
  if (!ids.ok()) {
    return FinishUnary(context, "Tokenize", ids.status());
  }
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    response->add_tokens(model_.TokenToPiece(id));
  }
  return FinishUnary(context, "Tokenize", absl::OkStatus());
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(
    grpc::CallbackServerContext* context, const v1::GetModelInfoRequest* /*request*/,
    v1::ModelInfo* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(*context); !caller.ok()) {
    return FinishUnary(context, "GetModelInfo", caller.status());
  }
  if (absl::Status st = intake_.CheckAccepting(); !st.ok()) {
    return FinishUnary(context, "GetModelInfo", st);
  }
  *response = model_.Info();
  return FinishUnary(context, "GetModelInfo", absl::OkStatus());
}

}  // namespace loom
