// The one place where Loom's outcomes become gRPC status codes (API.md §1,
// "Status codes"). Everything below the service speaks absl::Status with the
// codes of that table; the service converts here and nowhere else.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "loom/v1/generation.pb.h"
#include "types/request_params.h"

namespace loom {

// absl and gRPC share the canonical code numbers; the message is kept as is.
grpc::Status ToGrpcStatus(const absl::Status& status);

// UNAVAILABLE for calls that arrive while the daemon drains after SIGTERM.
absl::Status DrainingStatus();

// INTERNAL for calls that arrive after the engine has failed.
absl::Status EngineFailedStatus();

v1::FinishReason ToProtoFinishReason(FinishReason reason);

}  // namespace loom
