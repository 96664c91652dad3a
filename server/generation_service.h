// loom.v1.GenerationService on the gRPC callback API: validates and builds
// requests (RequestBuilder), hands them to the engine through a
// GenerationBackend and relays the outputs (Generate*Reactor).
#pragma once

#include "grpcpp/support/server_callback.h"
#include "loom/v1/generation.grpc.pb.h"
#include "server/generation_backend.h"
#include "server/model_frontend.h"
#include "server/request_intake.h"
#include "server/rpc_recorder.h"
#include "server/service_options.h"
#include "server/stream_watchdog.h"

namespace loom {

class GenerationService final : public v1::GenerationService::CallbackService {
 public:
  // model and backend must outlive the service; recorder, when set, sees the
  // outcome of every call.
  GenerationService(const ModelFrontend& model, GenerationBackend& backend,
                    RpcRecorder recorder = nullptr, const ServiceOptions& options = {});

  // From now on new calls get UNAVAILABLE, on every transport that shares
  // intake(); calls in flight carry on.
  void StopAccepting() { intake_.StopAccepting(); }
  // The intake the HTTP front end shares, so that both ports apply the same
  // validation and the same drain.
  RequestIntake& intake() { return intake_; }

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerateStream(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  // Everything that happens before the engine sees a request: the drain
  // check, validation, tokenization, deadline.
  // The caller's API key from the "authorization" metadata; a keyless
  // caller when auth is off, UNAUTHENTICATED when the key is missing or wrong.
  absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& context) const;
  absl::StatusOr<RequestParams> Prepare(const grpc::CallbackServerContext& context,
                                        const v1::GenerateRequest& request);
  grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                        std::string_view method, const absl::Status& status);

  const ModelFrontend& model_;
  GenerationBackend& backend_;
  RpcRecorder recorder_;
  const ServiceOptions options_;
  RequestIntake intake_;
  StreamWatchdog watchdog_;
};

}  // namespace loom
