#include <unistd.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics.h"

namespace loom {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The value of the sample line "name{labels} value" in a scrape, or -1.
double SampleValue(const std::string& scrape, const std::string& series) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Every metric name that API.md §2 (docs/api.md in the repo) promises.
std::set<std::string> ContractNames() {
  std::ifstream in(absl::StrCat(LOOM_SOURCE_DIR, "/docs/api.md"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t begin = doc.find("## 2. Prometheus metrics");
  const size_t end = doc.find("## 3.", begin);
  EXPECT_NE(begin, std::string::npos);
  const std::string section = doc.substr(begin, end - begin);
  // Metric names: a "loom_" or "process_" word of lowercase letters and '_'.
  std::set<std::string> names;
  for (size_t at = 0; at < section.size(); ++at) {
    const bool word_start = at == 0 || !(std::islower(section[at - 1]) || section[at - 1] == '_');
    if (!word_start ||
        (section.compare(at, 5, "loom_") != 0 && section.compare(at, 8, "process_") != 0)) {
      continue;
    }
    size_t end = at;
    while (end < section.size() && (std::islower(section[end]) || section[end] == '_')) ++end;
    // The bare prefix "loom_" of the table's preamble is no name.
    if (section[end - 1] != '_') names.insert(section.substr(at, end - at));
    at = end;
  }
  return names;
}

class MetricsRegistryTest : public ::testing::Test {
 protected:
  EngineStats stats_;
  MetricsRegistry metrics_{BuildInfo{.version = "0.1.0",
                                     .backend = "cpu",
                                     .model = "smollm2",
                                     .block_size = 16,
                                     .num_kv_blocks = 5823},
                           [this] { return stats_; }};
};

TEST_F(MetricsRegistryTest, ScrapeCarriesEveryContractName) {
  Usage usage{.prompt_tokens = 12,
              .completion_tokens = 5,
              .queue_seconds = 0.002,
              .time_to_first_token_seconds = 0.02,
              .total_seconds = 0.1};
  metrics_.OnRequestFinished(FinishLabel::kStop, usage, "");
  metrics_.OnStep(0.004, 3, 40);
  const double intervals[] = {0.01, 0.02};
  metrics_.OnInterTokenLatencies(intervals);
  metrics_.RecordGrpcRequest("Generate", absl::StatusCode::kOk);
  const std::string scrape = metrics_.Scrape();

  const std::set<std::string> names = ContractNames();
  ASSERT_GE(names.size(), 25u);  // the table's 22 rows, some naming two metrics
  for (const std::string& name : names) {
    EXPECT_THAT(scrape, HasSubstr(absl::StrCat("\n# TYPE ", name, " "))) << name;
  }
}

TEST_F(MetricsRegistryTest, TenantsGetTheirOwnSeries) {
  metrics_.OnRequestFinished(FinishLabel::kStop, Usage{.prompt_tokens = 10, .completion_tokens = 4},
                             "alpha");
  metrics_.OnRequestFinished(FinishLabel::kStop, Usage{.prompt_tokens = 5, .completion_tokens = 2},
                             "alpha");
  metrics_.OnRequestFinished(FinishLabel::kRejected, Usage{}, "beta");
  metrics_.OnRequestFinished(FinishLabel::kLength,
                             Usage{.prompt_tokens = 1, .completion_tokens = 1}, "");
  const std::string scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="stop",tenant="alpha"})"), 2);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="rejected",tenant="beta"})"),
            1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="stop"})"), 0);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="length"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_prompt_tokens_total{tenant="alpha"})"), 15);
  EXPECT_EQ(SampleValue(scrape, R"(loom_generation_tokens_total{tenant="alpha"})"), 6);
  EXPECT_EQ(SampleValue(scrape, "loom_prompt_tokens_total"), 1);
  // A rejected request has no tokens: no token series for beta.
  EXPECT_THAT(scrape, Not(HasSubstr(R"(loom_prompt_tokens_total{tenant="beta"})")));
}

TEST_F(MetricsRegistryTest, CountsRequestsAndTokensByFinishReason) {
  metrics_.OnRequestFinished(FinishLabel::kStop, Usage{.prompt_tokens = 10, .completion_tokens = 4},
                             "");
  metrics_.OnRequestFinished(FinishLabel::kLength,
                             Usage{.prompt_tokens = 7, .completion_tokens = 8}, "");
  metrics_.OnRequestFinished(FinishLabel::kAborted,
                             Usage{.prompt_tokens = 3, .completion_tokens = 1}, "");
  metrics_.OnRequestFinished(FinishLabel::kRejected, Usage{}, "");
  const std::string scrape = metrics_.Scrape();

  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="stop"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="length"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="aborted"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="rejected"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="error"})"), 0);
  EXPECT_EQ(SampleValue(scrape, R"(loom_requests_total{finish_reason="deadline"})"), 0);
  EXPECT_EQ(SampleValue(scrape, "loom_prompt_tokens_total"), 20);
  EXPECT_EQ(SampleValue(scrape, "loom_generation_tokens_total"), 13);
  // The rejected request never ran: no latency sample for it.
  EXPECT_EQ(SampleValue(scrape, "loom_request_duration_seconds_count"), 3);
  EXPECT_EQ(SampleValue(scrape, "loom_request_generation_tokens_sum"), 13);
}

// A sliding-window model's blocks in use come by the kind of layer group
// that holds them; free and cached blocks are the pool's.
TEST_F(MetricsRegistryTest, SlidingWindowModelsSplitUsedBlocksByGroup) {
  stats_.num_blocks_free = 10;
  stats_.num_blocks_used = 9;
  stats_.kv_groups_by_kind = true;
  stats_.num_blocks_used_full = 4;
  stats_.num_blocks_used_sliding = 5;
  const std::string scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="used",group="full_attention"})"), 4);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="used",group="sliding_window"})"), 5);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="free"})"), 10);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="used"})"), -1);
}

TEST_F(MetricsRegistryTest, LatencyBucketsSpanOneMillisecondToOneMinute) {
  metrics_.OnStep(0.0005, 1, 1);
  metrics_.OnStep(90, 1, 1);
  const std::string scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, R"(loom_engine_step_duration_seconds_bucket{le="0.001"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_engine_step_duration_seconds_bucket{le="60"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_engine_step_duration_seconds_bucket{le="+Inf"})"), 2);
  EXPECT_EQ(MetricsRegistry::LatencyBuckets().front(), 0.001);
  EXPECT_EQ(MetricsRegistry::LatencyBuckets().back(), 60);
}

TEST_F(MetricsRegistryTest, GaugesFollowTheLatestSnapshot) {
  stats_.num_running = 3;
  stats_.num_waiting = 7;
  stats_.kv_cache_usage = 0.25;
  stats_.num_blocks_free = 10;
  stats_.num_blocks_used = 4;
  stats_.num_blocks_cached = 2;
  stats_.num_steps = 99;
  stats_.num_preemptions = 5;
  stats_.prefix_query_tokens = 64;
  stats_.prefix_hit_tokens = 32;
  std::string scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, "loom_requests_running"), 3);
  EXPECT_EQ(SampleValue(scrape, "loom_requests_waiting"), 7);
  EXPECT_EQ(SampleValue(scrape, "loom_kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="free"})"), 10);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="used"})"), 4);
  EXPECT_EQ(SampleValue(scrape, R"(loom_kv_cache_blocks{state="cached"})"), 2);
  EXPECT_EQ(SampleValue(scrape, "loom_engine_steps_total"), 99);
  EXPECT_EQ(SampleValue(scrape, "loom_preemptions_total"), 5);
  EXPECT_EQ(SampleValue(scrape, "loom_prefix_cache_queries_total"), 64);
  EXPECT_EQ(SampleValue(scrape, "loom_prefix_cache_hits_total"), 32);

  stats_.num_running = 0;
  scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, "loom_requests_running"), 0);
}

TEST_F(MetricsRegistryTest, EveryNameIsThereBeforeAnyEvent) {
  const std::string scrape = metrics_.Scrape();
  for (const std::string& name : ContractNames()) {
    EXPECT_THAT(scrape, HasSubstr(absl::StrCat("\n# TYPE ", name, " "))) << name;
  }
  EXPECT_EQ(SampleValue(scrape, R"(loom_grpc_requests_total{code="OK",method="GenerateStream"})"),
            0);
}

TEST_F(MetricsRegistryTest, GrpcRequestsByMethodAndCode) {
  metrics_.RecordGrpcRequest("Generate", absl::StatusCode::kOk);
  metrics_.RecordGrpcRequest("Generate", absl::StatusCode::kOk);
  metrics_.RecordGrpcRequest("GenerateStream", absl::StatusCode::kInvalidArgument);
  const std::string scrape = metrics_.Scrape();
  EXPECT_EQ(SampleValue(scrape, R"(loom_grpc_requests_total{code="OK",method="Generate"})"), 2);
  EXPECT_EQ(
      SampleValue(scrape,
                  R"(loom_grpc_requests_total{code="INVALID_ARGUMENT",method="GenerateStream"})"),
      1);
}

TEST_F(MetricsRegistryTest, BuildInfoAndProcessMetrics) {
  const std::string scrape = metrics_.Scrape();
  EXPECT_EQ(
      SampleValue(scrape, R"(loom_build_info{backend="cpu",model="smollm2",version="0.1.0"})"), 1);
  EXPECT_EQ(SampleValue(scrape, R"(loom_cache_config_info{block_size="16",num_gpu_blocks="5823"})"),
            1);
  EXPECT_GT(SampleValue(scrape, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(SampleValue(scrape, "process_open_fds"), 2);
  const double start = SampleValue(scrape, "process_start_time_seconds");
  const double now = absl::ToUnixSeconds(absl::Now());
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 24 * 3600);
  EXPECT_GE(SampleValue(scrape, "process_cpu_seconds_total"), 0);
  EXPECT_THAT(scrape, Not(HasSubstr("nan")));
}

TEST_F(MetricsRegistryTest, ProcessCpuTimeMovesWithWork) {
  const double before = SampleValue(metrics_.Scrape(), "process_cpu_seconds_total");
  // Burn CPU until the kernel's tick-granular counter moves; bounded by work,
  // not by wall time, so a loaded machine only makes it slower.
  std::atomic<double> sink = 0;
  double after = before;
  for (int round = 0; round < 2000 && after <= before; ++round) {
    for (int i = 0; i < 1'000'000; ++i) sink = sink + i * 1e-9;
    after = SampleValue(metrics_.Scrape(), "process_cpu_seconds_total");
  }
  EXPECT_GT(after, before);
}

}  // namespace
}  // namespace loom
