// The unary Generate call: submits the request to the engine, gathers every
// sample's output into one GenerateResponse and finishes on the engine's final
// output. A cancelled call (client gone or deadline) aborts it in the engine.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "loom/v1/generation.pb.h"
#include "scheduler/request_params.h"
#include "server/generation_backend.h"
#include "server/reactor_sink.h"
#include "server/rpc_recorder.h"
#include "server/service_options.h"

namespace loom {

class GenerateUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  // response belongs to gRPC and outlives the call.
  GenerateUnaryReactor(GenerationBackend& backend, const RpcRecorder& recorder,
                       const ServiceOptions& options, RequestParams params,
                       v1::GenerateResponse* response);

  void OnCancel() override;
  void OnDone() override;

 private:
  using Sink = ReactorSink<GenerateUnaryReactor>;
  friend Sink;
  // The constructor's work: submits params, or finishes on a submit error.
  void Submit(RequestParams params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnOutput(RequestOutput output);
  void FinishWith(const absl::Status& status, const Usage& usage);

  GenerationBackend& backend_;
  const RpcRecorder& recorder_;
  const ServiceOptions& options_;
  const std::string request_id_;
  // Written once by the constructor, before any callback can run; read-only
  // afterwards, so read without mu_.
  std::optional<GenerationBackend::Handle> handle_;
  Mutex mu_;
  v1::GenerateResponse* response_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Sink> sink_;
};

}  // namespace loom
