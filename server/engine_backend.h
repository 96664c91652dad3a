// GenerationBackend over the real Engine: what loomd's service submits to.
#pragma once

#include <memory>
#include <type_traits>

#include "engine/engine.h"
#include "server/generation_backend.h"

namespace loom {

class EngineBackend final : public GenerationBackend {
 public:
  // engine must outlive the backend.
  explicit EngineBackend(Engine& engine) : engine_(engine) {}

  absl::StatusOr<Handle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink) override {
    return engine_.Submit(std::move(params), std::move(sink));
  }
  void Abort(Handle handle) override { engine_.Abort(handle); }

 private:
  static_assert(std::is_same_v<Handle, RequestHandle>);
  Engine& engine_;
};

}  // namespace loom
