// The per-RPC outcome hook: called once for every GenerationService call
// with the short method name and the status code it returned (for the
// loom_grpc_requests_total counter).
#pragma once

#include <functional>
#include <string_view>

#include "absl/status/status.h"

namespace loom {

using RpcRecorder = std::function<void(std::string_view method, absl::StatusCode code)>;

}  // namespace loom
