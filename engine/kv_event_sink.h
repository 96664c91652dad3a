// Where the engine hands its KV-cache events (types/kv_event.h): a publisher
// for prefix-aware routers implements this.
#pragma once

#include <vector>

#include "types/kv_event.h"

namespace loom {

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;

  // On the engine thread, once per step that changed the prefix index, with
  // that step's events, oldest first. Must return at once: the engine waits.
  virtual void Publish(std::vector<KvEvent> events) = 0;
};

}  // namespace loom
