// Per-tenant admission limits, as a GenerationBackend in front of the real
// one: a tenant (the name its API key carries, RequestParams::tenant) may
// have at most max_concurrent requests in flight, and at most max_waiting of
// them still waiting for their first output. A request over either gets
// RESOURCE_EXHAUSTED (HTTP 429) before it reaches the engine's queue, so one
// tenant's burst cannot fill the queue that the others share. Requests
// without a tenant pass through unlimited.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "engine/engine_observer.h"
#include "server/generation_backend.h"

namespace loom {

struct TenantLimits {
  int32_t max_concurrent = 0;  // 0: no cap
  int32_t max_waiting = 0;     // 0: no cap
};

class TenantLimitedBackend final : public GenerationBackend {
 public:
  // inner must outlive this backend; observer (may be null) counts each
  // refusal as a rejected request, as the engine counts a full queue.
  TenantLimitedBackend(GenerationBackend& inner, TenantLimits limits,
                       EngineObserver* observer = nullptr)
      : inner_(inner), limits_(limits), observer_(observer) {}

  absl::StatusOr<Handle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink) override;
  void Abort(Handle handle) override { inner_.Abort(handle); }

  struct Counts {
    int32_t in_flight = 0;
    int32_t waiting = 0;
  };
  // What a tenant has now (zero for one never seen).
  Counts CountsOf(const std::string& tenant) const;

 private:
  class CountingSink;
  void Started(const std::string& tenant);
  void Finished(const std::string& tenant, bool started);

  GenerationBackend& inner_;
  const TenantLimits limits_;
  EngineObserver* const observer_;
  mutable Mutex mu_;
  // Bounded by the tenants of the keys file; entries at zero are removed.
  absl::flat_hash_map<std::string, Counts> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom
