#include "server/metrics.h"

#include <cstdint>
#include <string>
#include <utility>

#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"
#include "server/log.h"

namespace loom {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

constexpr FinishLabel kFinishLabels[] = {FinishLabel::kStop,     FinishLabel::kLength,
                                         FinishLabel::kAborted,  FinishLabel::kError,
                                         FinishLabel::kDeadline, FinishLabel::kRejected};

constexpr const char* kGenerationMethods[] = {"Generate", "GenerateStream", "Tokenize",
                                              "GetModelInfo"};

// 1, 2, 4, ... up to and including max: token counts and batch sizes span
// several orders of magnitude, so the bounds grow geometrically.
Histogram::BucketBoundaries PowersOfTwo(double max) {
  Histogram::BucketBoundaries bounds;
  for (double bound = 1; bound <= max; bound *= 2) {
    bounds.push_back(bound);
  }
  return bounds;
}

Histogram* AddHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help, const Histogram::BucketBoundaries& buckets) {
  return &BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

}  // namespace

const Histogram::BucketBoundaries& MetricsRegistry::LatencyBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
      0.75,  1.0,    1.5,   2.0,  2.5,   5.0,  7.5,   10,  15,   20,  30,  45,  60};
  return kBuckets;
}

MetricsRegistry::MetricsRegistry(const BuildInfo& build, std::function<EngineStats()> snapshot)
    : engine_(std::move(snapshot)) {
  prometheus::Registry& registry = *registry_;
  AddCallbackCounter("loom_log_messages_dropped_total",
                     "Log lines dropped because the log queue was full.",
                     [] { return static_cast<double>(LogMessagesDropped()); });
  AddCallbackCounter("loom_kv_events_dropped_total",
                     "KV-cache event batches dropped because the publisher's queue was full; "
                     "the next batch sent starts with AllBlocksCleared.",
                     [this] { return kv_events_dropped_ ? kv_events_dropped_() : 0.0; });
  requests_family_ = &BuildCounter()
                          .Name("loom_requests_total")
                          .Help("Requests finished, by how they ended.")
                          .Register(registry);
  // Every label exists from the start so that rate() sees the first increment.
  for (FinishLabel label : kFinishLabels) {
    requests_[static_cast<size_t>(label)] =
        &requests_family_->Add({{"finish_reason", std::string(FinishLabelName(label))}});
  }
  prompt_tokens_family_ = &BuildCounter()
                               .Name("loom_prompt_tokens_total")
                               .Help("Prompt tokens of the finished requests.")
                               .Register(registry);
  prompt_tokens_ = &prompt_tokens_family_->Add({});
  generation_tokens_family_ = &BuildCounter()
                                   .Name("loom_generation_tokens_total")
                                   .Help("Tokens generated for the finished requests.")
                                   .Register(registry);
  generation_tokens_ = &generation_tokens_family_->Add({});
  const Histogram::BucketBoundaries& latency = LatencyBuckets();
  time_to_first_token_ = AddHistogram(registry, "loom_time_to_first_token_seconds",
                                      "Time from arrival to the first generated token.", latency);
  inter_token_latency_ = AddHistogram(registry, "loom_inter_token_latency_seconds",
                                      "Time between consecutive tokens of a sample.", latency);
  request_duration_ = AddHistogram(registry, "loom_request_duration_seconds",
                                   "End-to-end request time, arrival to last output.", latency);
  queue_time_ = AddHistogram(registry, "loom_request_queue_time_seconds",
                             "Time from arrival to first being scheduled.", latency);
  request_prompt_tokens_ = AddHistogram(registry, "loom_request_prompt_tokens",
                                        "Prompt tokens per request.", PowersOfTwo(131072));
  request_generation_tokens_ = AddHistogram(registry, "loom_request_generation_tokens",
                                            "Generated tokens per request.", PowersOfTwo(131072));
  step_duration_ = AddHistogram(registry, "loom_engine_step_duration_seconds",
                                "Wall time of one engine step.", latency);
  batch_size_ =
      AddHistogram(registry, "loom_batch_size", "Sequences per engine step.", PowersOfTwo(1024));
  batch_tokens_ =
      AddHistogram(registry, "loom_batch_tokens", "Tokens per engine step.", PowersOfTwo(65536));
  grpc_requests_ = &BuildCounter()
                        .Name("loom_grpc_requests_total")
                        .Help("Finished gRPC calls by method and status code.")
                        .Register(registry);
  // The OK series of every loom.v1 method exist from the start, so the name is
  // in every scrape and the first call already has a zero to rate against.
  for (const char* method : kGenerationMethods) {
    grpc_requests_->Add({{"method", method}, {"code", "OK"}});
  }
  http_requests_ = &BuildCounter()
                        .Name("loom_http_requests_total")
                        .Help("HTTP responses by route and status code.")
                        .Register(registry);
  // Likewise the 200 series of the OpenAI generation routes.
  for (const char* route : {"/v1/completions", "/v1/chat/completions"}) {
    http_requests_->Add({{"route", route}, {"code", "200"}});
  }
  BuildGauge()
      .Name("loom_build_info")
      .Help("Always 1; the labels say what is running.")
      .Register(registry)
      .Add({{"version", build.version}, {"backend", build.backend}, {"model", build.model}})
      .Set(1);
  // vLLM's label names, so that routers configured for vLLM read it as is.
  BuildGauge()
      .Name("loom_cache_config_info")
      .Help("Always 1; the labels give the KV cache's block size and usable blocks.")
      .Register(registry)
      .Add({{"block_size", std::to_string(build.block_size)},
            {"num_gpu_blocks", std::to_string(build.num_kv_blocks)}})
      .Set(1);
}

void MetricsRegistry::OnRequestFinished(FinishLabel label, const Usage& usage,
                                        std::string_view tenant) {
  const std::string tenant_name(tenant);
  if (tenant.empty()) {
    requests_[static_cast<size_t>(label)]->Increment();
  } else {
    requests_family_
        ->Add({{"finish_reason", std::string(FinishLabelName(label))}, {"tenant", tenant_name}})
        .Increment();
  }
  // A rejected request never reached the queue: it has no latencies or tokens.
  if (label == FinishLabel::kRejected) {
    return;
  }
  if (tenant.empty()) {
    prompt_tokens_->Increment(usage.prompt_tokens);
    generation_tokens_->Increment(usage.completion_tokens);
  } else {
    prompt_tokens_family_->Add({{"tenant", tenant_name}}).Increment(usage.prompt_tokens);
    generation_tokens_family_->Add({{"tenant", tenant_name}}).Increment(usage.completion_tokens);
  }
  request_prompt_tokens_->Observe(usage.prompt_tokens);
  request_generation_tokens_->Observe(usage.completion_tokens);
  request_duration_->Observe(usage.total_seconds);
  queue_time_->Observe(usage.queue_seconds);
  if (usage.completion_tokens > 0) {
    time_to_first_token_->Observe(usage.time_to_first_token_seconds);
  }
}

void MetricsRegistry::OnStep(double step_seconds, int32_t batch_seqs, int32_t batch_tokens) {
  step_duration_->Observe(step_seconds);
  batch_size_->Observe(batch_seqs);
  batch_tokens_->Observe(batch_tokens);
}

void MetricsRegistry::OnInterTokenLatencies(std::span<const double> seconds) {
  for (double interval : seconds) {
    inter_token_latency_->Observe(interval);
  }
}

void MetricsRegistry::RecordGrpcRequest(std::string_view method, absl::StatusCode code) {
  grpc_requests_->Add({{"method", std::string(method)}, {"code", absl::StatusCodeToString(code)}})
      .Increment();
}

void MetricsRegistry::RecordHttpRequest(std::string_view route, int code) {
  http_requests_->Add({{"route", std::string(route)}, {"code", std::to_string(code)}}).Increment();
}

void MetricsRegistry::SetKvEventsDropped(std::function<double()> dropped) {
  kv_events_dropped_ = std::move(dropped);
}

void MetricsRegistry::AddCallbackCounter(std::string name, std::string help,
                                         std::function<double()> value) {
  callback_counters_.push_back({std::move(name), std::move(help), std::move(value)});
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (const CallbackCounter& counter : callback_counters_) {
    prometheus::ClientMetric metric;
    metric.counter.value = counter.value();
    families.push_back(prometheus::MetricFamily{
        counter.name, counter.help, prometheus::MetricType::Counter, {metric}});
  }
  for (const prometheus::Collectable* collectable :
       {static_cast<const prometheus::Collectable*>(&engine_),
        static_cast<const prometheus::Collectable*>(&process_)}) {
    std::vector<prometheus::MetricFamily> more = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return families;
}

std::string MetricsRegistry::Scrape() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

}  // namespace loom
