// loomd's Prometheus metrics (API.md §2). MetricsRegistry is the engine's
// observer (request, step and inter-token events, on the engine thread), the
// gRPC service's per-RPC counter, and the source of the /metrics text, which
// also carries the engine snapshot and the process_* metrics.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine_observer.h"
#include "engine/engine_stats.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/metrics_engine.h"
#include "server/metrics_process.h"

namespace loom {

struct BuildInfo {
  std::string version;
  std::string backend;  // cpu or cuda
  std::string model;    // the served model name
  // The KV cache's geometry, for loom_cache_config_info (what vLLM's
  // vllm:cache_config_info tells routers such as the Inference Extension's
  // endpoint picker): tokens per block and usable blocks.
  int32_t block_size = 0;
  int32_t num_kv_blocks = 0;
};

class MetricsRegistry : public EngineObserver {
 public:
  // snapshot: the engine's last published stats (see EngineStatsCollector).
  MetricsRegistry(const BuildInfo& build, std::function<EngineStats()> snapshot);

  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // EngineObserver; called on the engine thread.
  // With a tenant, the request and token counters get a `tenant` label; the
  // tenants come from the keys file, so the series stay bounded.
  void OnRequestFinished(FinishLabel label, const Usage& usage, std::string_view tenant) override;
  void OnStep(double step_seconds, int32_t batch_seqs, int32_t batch_tokens) override;
  void OnInterTokenLatencies(std::span<const double> seconds) override;

  // Once per finished RPC, from any gRPC thread. method is the short method
  // name (Generate, GenerateStream, ...); code is the gRPC status it returned
  // (gRPC and absl share the numbering and the names).
  void RecordGrpcRequest(std::string_view method, absl::StatusCode code);

  // Once per HTTP response, from the HTTP threads: route is the registered
  // path (or "other", so that the label stays bounded), code the status sent.
  void RecordHttpRequest(std::string_view route, int code);

  // A counter whose value value() reads at scrape time (for counts kept
  // elsewhere, e.g. loom_log_messages_dropped_total). Call before serving.
  void AddCallbackCounter(std::string name, std::string help, std::function<double()> value);

  // Where loom_kv_events_dropped_total reads the KV-event batches the
  // publisher dropped (0 without one). Call before serving.
  void SetKvEventsDropped(std::function<double()> dropped);

  // Every metric family, in the text exposition format that /metrics serves.
  [[nodiscard]] std::string Scrape() const;
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const;

  // Bucket bounds in seconds, 1 ms .. 60 s, shared by every latency histogram.
  static const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  EngineStatsCollector engine_;
  ProcessCollector process_;

  std::array<prometheus::Counter*, 6> requests_{};  // indexed by FinishLabel
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* prompt_tokens_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* generation_tokens_family_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* request_duration_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* request_prompt_tokens_ = nullptr;
  prometheus::Histogram* request_generation_tokens_ = nullptr;
  prometheus::Histogram* step_duration_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Histogram* batch_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* grpc_requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* http_requests_ = nullptr;
  struct CallbackCounter {
    std::string name;
    std::string help;
    std::function<double()> value;
  };
  std::vector<CallbackCounter> callback_counters_;
  std::function<double()> kv_events_dropped_;
};

}  // namespace loom
