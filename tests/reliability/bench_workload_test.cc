// The workload of `loom bench`: seeded Poisson arrivals, random and JSONL
// datasets, and the JSON and table it writes.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/bench/arrivals.h"
#include "tools/bench/dataset.h"
#include "tools/bench/report.h"

namespace loom::bench {
namespace {

using ::testing::HasSubstr;

TEST(PoissonArrivalsTest, InfiniteRateSendsEverythingAtOnce) {
  for (double rate : {std::numeric_limits<double>::infinity(), 0.0}) {
    const std::vector<double> a = PoissonArrivals(5, rate, 1);
    ASSERT_EQ(a.size(), 5u);
    for (double t : a) EXPECT_EQ(t, 0);
  }
}

TEST(PoissonArrivalsTest, ExponentialGapsAtTheRate) {
  constexpr int kN = 20000;
  constexpr double kRate = 4.0;
  const std::vector<double> a = PoissonArrivals(kN, kRate, 7);
  ASSERT_EQ(a.size(), static_cast<size_t>(kN));
  EXPECT_EQ(a[0], 0);
  int above_mean = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    ASSERT_GE(a[i], a[i - 1]);
    if (a[i] - a[i - 1] > 1 / kRate) ++above_mean;
  }
  // Mean gap 1/rate (relative standard error 1/sqrt(N) = 0.7%), and
  // P(gap > mean) = 1/e for an exponential distribution.
  EXPECT_NEAR(a.back() / (kN - 1), 1 / kRate, 0.05 / kRate);
  EXPECT_NEAR(static_cast<double>(above_mean) / (kN - 1), std::exp(-1.0), 0.02);
}

TEST(PoissonArrivalsTest, SeedDeterminesTheSchedule) {
  EXPECT_EQ(PoissonArrivals(100, 2, 3), PoissonArrivals(100, 2, 3));
  EXPECT_NE(PoissonArrivals(100, 2, 3), PoissonArrivals(100, 2, 4));
}

RandomDatasetOptions Options(double range_ratio) {
  return RandomDatasetOptions{.num_prompts = 300,
                              .input_len = 100,
                              .output_len = 20,
                              .range_ratio = range_ratio,
                              .min_token_id = 1000,
                              .max_token_id = 2000,
                              .seed = 5};
}

TEST(RandomDatasetTest, LengthsAndIdsInRange) {
  absl::StatusOr<std::vector<BenchPrompt>> prompts = RandomDataset(Options(0.5));
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 300u);
  size_t min_in = 1000, max_in = 0;
  for (const BenchPrompt& p : *prompts) {
    min_in = std::min(min_in, p.token_ids.size());
    max_in = std::max(max_in, p.token_ids.size());
    EXPECT_GE(p.output_len, 10);
    EXPECT_LE(p.output_len, 30);
    for (int32_t id : p.token_ids) {
      ASSERT_GE(id, 1000);
      ASSERT_LT(id, 2000);
    }
  }
  EXPECT_GE(min_in, 50u);
  EXPECT_LE(max_in, 150u);
  // 300 uniform draws from 101 lengths reach near both ends.
  EXPECT_LT(min_in, 60u);
  EXPECT_GT(max_in, 140u);
}

TEST(RandomDatasetTest, ZeroRatioGivesExactLengthsAndSeedRepeats) {
  absl::StatusOr<std::vector<BenchPrompt>> a = RandomDataset(Options(0));
  absl::StatusOr<std::vector<BenchPrompt>> b = RandomDataset(Options(0));
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].token_ids.size(), 100u);
    EXPECT_EQ((*a)[i].output_len, 20);
    EXPECT_EQ((*a)[i].token_ids, (*b)[i].token_ids);
  }
}

TEST(RandomDatasetTest, RejectsBadOptions) {
  RandomDatasetOptions o = Options(0);
  o.range_ratio = 1;
  EXPECT_FALSE(RandomDataset(o).ok());
  o = Options(0);
  o.input_len = 0;
  EXPECT_FALSE(RandomDataset(o).ok());
  o = Options(0);
  o.max_token_id = o.min_token_id;
  EXPECT_FALSE(RandomDataset(o).ok());
}

TEST(SafeTokenRangeTest, SkipsBothEndsOfTheVocabulary) {
  int32_t lo = 0, hi = 0;
  SafeTokenRange(49152, lo, hi);
  EXPECT_EQ(lo, 1000);
  EXPECT_EQ(hi, 48152);
  SafeTokenRange(258, lo, hi);
  EXPECT_EQ(lo, 25);
  EXPECT_EQ(hi, 233);
}

class JsonlDatasetTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("loom_bench_dataset_" + std::to_string(::getpid()) + ".jsonl"))
                          .string();
};

TEST_F(JsonlDatasetTest, ReadsPromptsAndCycles) {
  const std::string path =
      Write("{\"prompt\": \"Hello\", \"output_len\": 7}\n\n{\"prompt\": \"World\"}\n");
  absl::StatusOr<std::vector<BenchPrompt>> prompts = JsonlDataset(path, 3, 42);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 3u);
  EXPECT_EQ((*prompts)[0].text, "Hello");
  EXPECT_EQ((*prompts)[0].output_len, 7);
  EXPECT_EQ((*prompts)[1].text, "World");
  EXPECT_EQ((*prompts)[1].output_len, 42);
  EXPECT_EQ((*prompts)[2].text, "Hello");
  EXPECT_TRUE((*prompts)[0].token_ids.empty());
}

TEST_F(JsonlDatasetTest, RejectsMalformedLines) {
  EXPECT_FALSE(JsonlDataset(Write("{\"text\": \"x\"}\n"), 1, 1).ok());
  EXPECT_FALSE(JsonlDataset(Write("not json\n"), 1, 1).ok());
  EXPECT_FALSE(JsonlDataset(Write("{\"prompt\": \"x\", \"output_len\": -3}\n"), 1, 1).ok());
  EXPECT_FALSE(JsonlDataset(Write(""), 1, 1).ok());
  EXPECT_FALSE(JsonlDataset(path_ + ".missing", 1, 1).ok());
}

TEST(ReportTest, JsonHasVllmKeys) {
  BenchMetrics m;
  m.duration = 2;
  m.completed = 3;
  m.ttft_ms.p99 = 12.5;
  RunConfig config;
  config.model_id = "m";
  config.request_rate = std::numeric_limits<double>::infinity();
  const nlohmann::json j = nlohmann::json::parse(ToJson(m, config));
  for (const char* key :
       {"duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
        "output_throughput", "total_token_throughput", "request_goodput"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p90", "p99"}) {
      EXPECT_TRUE(j.contains(std::string(stat) + "_" + metric + "_ms")) << stat << metric;
    }
  }
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["p99_ttft_ms"], 12.5);
  EXPECT_EQ(j["request_rate"], "inf");
}

TEST(ReportTest, TableShowsTheRun) {
  BenchMetrics m;
  m.completed = 200;
  m.duration = 12.345;
  m.tpot_ms.median = 42.1;
  const std::string table = FormatTable(m, /*with_goodput=*/false);
  EXPECT_THAT(table, HasSubstr("Successful requests:                     200"));
  EXPECT_THAT(table, HasSubstr("Benchmark duration (s):                  12.35"));
  EXPECT_THAT(table, HasSubstr("Median TPOT (ms):                        42.10"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("goodput")));
  EXPECT_THAT(FormatTable(m, true), HasSubstr("Request goodput (req/s):"));
}

}  // namespace
}  // namespace loom::bench
