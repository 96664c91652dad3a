// The unary Generate call: submits the request to the engine, gathers every
// sample's output into one GenerateResponse and finishes on the engine's final
// output. A cancelled call (client gone or deadline) aborts it in the engine.
#pragma once

#include "absl/base/thread_annotations.h"
#include "grpcpp/support/server_callback.h"
#include "loom/v1/generation.pb.h"
#include "server/generate_reactor_base.h"
#include "server/generation_backend.h"
#include "server/rpc_recorder.h"
#include "server/service_options.h"
#include "types/request_params.h"

namespace loom {

class GenerateUnaryReactor final
    : public GenerateReactorBase<GenerateUnaryReactor, grpc::ServerUnaryReactor> {
 public:
  // response belongs to gRPC and outlives the call.
  GenerateUnaryReactor(GenerationBackend& backend, const RpcRecorder& recorder,
                       const ServiceOptions& options, RequestParams params,
                       v1::GenerateResponse* response);

 private:
  friend Sink;
  // The constructor's work: submits params, or finishes on a submit error.
  void Submit(RequestParams params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnOutput(RequestOutput output);

  v1::GenerateResponse* response_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace loom
