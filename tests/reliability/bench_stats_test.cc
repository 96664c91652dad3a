// Statistics of `loom bench`: percentiles as numpy computes them, the vLLM
// definitions of TPOT, ITL and goodput, and the --slo syntax.
#include "tools/bench/bench_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace loom::bench {
namespace {

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
}

TEST(PercentileTest, EdgeCases) {
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 99), 7);
}

TEST(SummarizeTest, MeanMedianPopulationStd) {
  const Summary s = Summarize({9, 2, 4, 4, 4, 5, 5, 7});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_DOUBLE_EQ(s.stddev, 2);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.p90, 7.6);
  EXPECT_DOUBLE_EQ(s.p99, 8.86);
}

TEST(SummarizeTest, EmptyIsZero) {
  const Summary s = Summarize({});
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p99, 0);
}

TEST(ParseSloTest, ReadsDurationsInMilliseconds) {
  absl::StatusOr<Slo> slo = ParseSlo("ttft=500ms,tpot=50ms, e2el=2s");
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->ttft_ms, 500);
  EXPECT_EQ(slo->tpot_ms, 50);
  EXPECT_EQ(slo->e2el_ms, 2000);
}

TEST(ParseSloTest, EmptyMeansNoObjective) {
  absl::StatusOr<Slo> slo = ParseSlo("");
  ASSERT_TRUE(slo.ok());
  EXPECT_FALSE(slo->ttft_ms.has_value());
  EXPECT_FALSE(slo->tpot_ms.has_value());
  EXPECT_FALSE(slo->e2el_ms.has_value());
}

TEST(ParseSloTest, RejectsUnknownKeysAndBadValues) {
  EXPECT_FALSE(ParseSlo("latency=1s").ok());
  EXPECT_FALSE(ParseSlo("ttft=500").ok());
  EXPECT_FALSE(ParseSlo("ttft").ok());
  EXPECT_FALSE(ParseSlo("ttft=-5ms").ok());
}

RequestRecord Record(int64_t in, int64_t out, double ttft, double e2el, std::vector<double> itls) {
  return RequestRecord{.ok = true,
                       .input_tokens = in,
                       .output_tokens = out,
                       .ttft = ttft,
                       .e2el = e2el,
                       .itls = std::move(itls)};
}

TEST(ComputeMetricsTest, FollowsVllmDefinitions) {
  const std::vector<RequestRecord> records = {
      // TPOT (1.1 - 0.1) / 4 = 250 ms.
      Record(10, 5, 0.1, 1.1, {0.2, 0.3, 0.25, 0.25}),
      // TPOT (0.5 - 0.3) / 2 = 100 ms.
      Record(20, 3, 0.3, 0.5, {0.1, 0.1}),
      // One token: no TPOT, no ITL.
      Record(30, 1, 0.2, 0.2, {}),
      RequestRecord{},
  };
  const BenchMetrics m = ComputeMetrics(records, /*duration=*/2.0, Slo{});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 60);
  EXPECT_EQ(m.total_output_tokens, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 34.5);
  EXPECT_DOUBLE_EQ(m.ttft_ms.mean, 200);
  EXPECT_DOUBLE_EQ(m.ttft_ms.median, 200);
  EXPECT_DOUBLE_EQ(m.tpot_ms.mean, 175);
  EXPECT_DOUBLE_EQ(m.tpot_ms.median, 175);
  EXPECT_DOUBLE_EQ(m.itl_ms.mean, 1.2 / 6 * 1e3);
  EXPECT_DOUBLE_EQ(m.itl_ms.median, 225);
  EXPECT_DOUBLE_EQ(m.e2el_ms.mean, 600);
  // No SLO: every completed request is good.
  EXPECT_EQ(m.good_requests, 3);
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.5);
}

TEST(ComputeMetricsTest, GoodputCountsRequestsWithinEverySlo) {
  const std::vector<RequestRecord> records = {
      Record(10, 5, 0.1, 1.1, {}),  // TPOT 250 ms: misses tpot
      Record(10, 3, 0.3, 0.5, {}),  // ttft 300 ms, TPOT 100 ms: good
      Record(10, 3, 0.6, 0.7, {}),  // ttft 600 ms: misses ttft
      Record(10, 1, 0.2, 0.2, {}),  // one token meets any TPOT: good
  };
  Slo slo;
  slo.ttft_ms = 500;
  slo.tpot_ms = 150;
  const BenchMetrics m = ComputeMetrics(records, 4.0, slo);
  EXPECT_EQ(m.good_requests, 2);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);
  Slo e2e_slo;
  e2e_slo.e2el_ms = 650;
  const BenchMetrics e2e = ComputeMetrics(records, 4.0, e2e_slo);
  EXPECT_EQ(e2e.good_requests, 2);
}

TEST(ComputeMetricsTest, NothingCompleted) {
  const std::vector<RequestRecord> records = {RequestRecord{}};
  const BenchMetrics m = ComputeMetrics(records, 1.0, Slo{});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.request_throughput, 0);
  EXPECT_EQ(m.ttft_ms.mean, 0);
}

}  // namespace
}  // namespace loom::bench
