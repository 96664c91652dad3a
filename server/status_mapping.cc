#include "server/status_mapping.h"

#include <string>

namespace loom {
namespace {

// The numeric values are the canonical codes of both libraries; checking a
// few pins the assumption that makes the cast below correct.
static_assert(static_cast<int>(absl::StatusCode::kInvalidArgument) ==
              static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
static_assert(static_cast<int>(absl::StatusCode::kResourceExhausted) ==
              static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
static_assert(static_cast<int>(absl::StatusCode::kUnavailable) ==
              static_cast<int>(grpc::StatusCode::UNAVAILABLE));
static_assert(static_cast<int>(absl::StatusCode::kDeadlineExceeded) ==
              static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
static_assert(static_cast<int>(absl::StatusCode::kCancelled) ==
              static_cast<int>(grpc::StatusCode::CANCELLED));
static_assert(static_cast<int>(absl::StatusCode::kInternal) ==
              static_cast<int>(grpc::StatusCode::INTERNAL));
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
              static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  // absl::Status only holds canonical codes (it turns others into kUnknown).
  return {static_cast<grpc::StatusCode>(status.code()),
          {status.message().data(), status.message().size()}};
}

absl::Status DrainingStatus() {
  return absl::UnavailableError("server is shutting down and accepts no new requests");
}

absl::Status EngineFailedStatus() {
  return absl::InternalError("the engine has failed; the server is restarting");
}

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kAborted:
      return v1::FINISH_REASON_ABORTED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

}  // namespace loom
