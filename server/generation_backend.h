// What the gRPC service needs from the engine: submit a request with its output
// sink, abort it. loomd backs it with the real Engine (EngineBackend); service
// tests back it with a scripted fake.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/request_output.h"
#include "types/request_params.h"

namespace loom {

class GenerationBackend {
 public:
  using Handle = uint64_t;

  virtual ~GenerationBackend() = default;

  // On success the sink receives the request's outputs, ending with exactly
  // one output whose `finished` is set; on error it receives nothing.
  virtual absl::StatusOr<Handle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink) = 0;

  // Ends the request early; its sink then gets a final output with CANCELLED.
  // Harmless for a request that has already finished.
  virtual void Abort(Handle handle) = 0;
};

}  // namespace loom
