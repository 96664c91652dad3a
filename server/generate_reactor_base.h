// What the unary and the streaming Generate reactors share: the backend they
// submit to, the handle of the submitted request, the sink the engine pushes
// outputs into, the mutex that orders those outputs against gRPC's callbacks,
// and the common ends of a call (rejection at submit, abort on cancel, the
// access log and metrics on finish, and self-deletion in OnDone).
//
// Derived is the concrete reactor (it must befriend ReactorSink<Derived> and
// have OnOutput(RequestOutput)); GrpcReactor is the gRPC reactor it is, e.g.
// grpc::ServerUnaryReactor or grpc::ServerWriteReactor<Response>.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "server/access_log.h"
#include "server/generation_backend.h"
#include "server/log.h"
#include "server/reactor_sink.h"
#include "server/rpc_recorder.h"
#include "server/service_options.h"
#include "server/status_mapping.h"
#include "types/request_params.h"

namespace loom {

template <typename Derived, typename GrpcReactor>
class GenerateReactorBase : public GrpcReactor {
 public:
  void OnCancel() override {
    ReactorAcquire();
    const std::optional<GenerationBackend::Handle> handle = handle_;
    GenerationBackend& backend = backend_;
    // The abort may finish the call, after which OnDone may run at any time.
    ReactorRelease();
    if (handle.has_value()) {
      backend.Abort(*handle);
    }
  }

  void OnDone() override {
    ReactorAcquire();
    if (sink_ != nullptr) sink_->Detach();
    // A callback that returned without finishing released mu_ last.
    { MutexLock lock(mu_); }
    delete static_cast<Derived*>(this);
  }

 protected:
  using Sink = ReactorSink<Derived>;

  // method names the RPC in the access log and the metrics; it must be a
  // string literal (it outlives the call).
  GenerateReactorBase(const char* method, GenerationBackend& backend, const RpcRecorder& recorder,
                      const ServiceOptions& options, std::string request_id)
      : backend_(backend),
        recorder_(recorder),
        options_(options),
        request_id_(std::move(request_id)),
        method_(method) {}

  // Makes the sink and submits params to the backend with it, keeping the
  // handle; Derived's constructor calls it once (the sink points at Derived,
  // which exists only from Derived's constructor body on). On a submit error
  // logs the rejection and returns the error; the caller then marks the call
  // finished and calls FinishWith.
  absl::Status SubmitToBackend(RequestParams params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sink_ = std::make_shared<Sink>(static_cast<Derived*>(this));
    absl::StatusOr<GenerationBackend::Handle> handle = backend_.Submit(std::move(params), sink_);
    if (!handle.ok()) {
      LogLine(absl::StrCat("request ", request_id_, " rejected: ", handle.status().ToString()));
      return handle.status();
    }
    handle_ = *handle;
    return absl::OkStatus();
  }

  void LogAborted(const absl::Status& status) const {
    LogLine(absl::StrCat("request ", request_id_, " aborted: ", status.ToString()));
  }

  // Records the call's end and hands the status to gRPC; the last access to
  // the reactor before OnDone.
  void FinishWith(const absl::Status& status, const Usage& usage) {
    if (recorder_) {
      recorder_(method_, status.code());
    }
    LogAccess(options_.access_log, request_id_, method_, status, usage);
    grpc::Status grpc_status = ToGrpcStatus(status);
    ReactorRelease();
    this->Finish(std::move(grpc_status));
  }

  GenerationBackend& backend_;
  const RpcRecorder& recorder_;
  const ServiceOptions& options_;
  const std::string request_id_;
  const char* const method_;
  // Written once by the constructor, before any callback can run; read-only
  // afterwards, so read without mu_.
  std::optional<GenerationBackend::Handle> handle_;
  Mutex mu_;
  std::shared_ptr<Sink> sink_;  // set by SubmitToBackend, in Derived's constructor
};

}  // namespace loom
