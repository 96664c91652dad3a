#include "server/metrics_engine.h"

#include <string>
#include <utility>

namespace loom {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric Value(MetricType type, double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

MetricFamily Family(std::string name, std::string help, MetricType type, double value) {
  return MetricFamily{std::move(name), std::move(help), type, {Value(type, value)}};
}

}  // namespace

std::vector<MetricFamily> EngineStatsCollector::Collect() const {
  const EngineStats stats = snapshot_();
  std::vector<MetricFamily> families;
  families.push_back(Family("loom_requests_running", "Requests in the running batch.",
                            MetricType::Gauge, stats.num_running));
  families.push_back(Family("loom_requests_waiting", "Requests waiting to be scheduled.",
                            MetricType::Gauge, stats.num_waiting));
  families.push_back(Family("loom_kv_cache_usage_ratio",
                            "KV cache blocks held by requests over usable blocks (0..1).",
                            MetricType::Gauge, stats.kv_cache_usage));
  MetricFamily blocks{"loom_kv_cache_blocks", "KV cache blocks by state.", MetricType::Gauge, {}};
  blocks.metric.push_back(Value(MetricType::Gauge, stats.num_blocks_free, {{"state", "free"}}));
  if (stats.kv_groups_by_kind) {
    // A sliding-window model's blocks in use, by the layers that hold them.
    blocks.metric.push_back(Value(MetricType::Gauge, stats.num_blocks_used_full,
                                  {{"state", "used"}, {"group", "full_attention"}}));
    blocks.metric.push_back(Value(MetricType::Gauge, stats.num_blocks_used_sliding,
                                  {{"state", "used"}, {"group", "sliding_window"}}));
  } else {
    blocks.metric.push_back(Value(MetricType::Gauge, stats.num_blocks_used, {{"state", "used"}}));
  }
  blocks.metric.push_back(Value(MetricType::Gauge, stats.num_blocks_cached, {{"state", "cached"}}));
  families.push_back(std::move(blocks));
  families.push_back(Family("loom_preemptions_total",
                            "Running requests preempted for lack of KV cache blocks.",
                            MetricType::Counter, static_cast<double>(stats.num_preemptions)));
  families.push_back(Family("loom_prefix_cache_queries_total",
                            "Prompt tokens looked up in the prefix cache.", MetricType::Counter,
                            static_cast<double>(stats.prefix_query_tokens)));
  families.push_back(Family("loom_prefix_cache_hits_total",
                            "Prompt tokens found in the prefix cache.", MetricType::Counter,
                            static_cast<double>(stats.prefix_hit_tokens)));
  families.push_back(Family("loom_engine_steps_total",
                            "Engine steps executed (liveness heartbeat).", MetricType::Counter,
                            static_cast<double>(stats.num_steps)));
  return families;
}

}  // namespace loom
