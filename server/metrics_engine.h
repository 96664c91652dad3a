// Scrape-time view of the engine: the gauges (running, waiting, KV cache) and
// the counters the engine keeps itself (steps, preemptions, prefix-cache
// tokens), read from the last EngineStats snapshot the engine published.
#pragma once

#include <functional>
#include <vector>

#include "engine/engine_stats.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace loom {

class EngineStatsCollector : public prometheus::Collectable {
 public:
  // snapshot returns the engine's last published stats; it is called on the
  // HTTP thread and must not wait for the engine thread.
  explicit EngineStatsCollector(std::function<EngineStats()> snapshot)
      : snapshot_(std::move(snapshot)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<EngineStats()> snapshot_;
};

}  // namespace loom
