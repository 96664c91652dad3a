#include "tools/bench/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace loom::bench {
namespace {

constexpr int kWidth = 50;

void Row(std::string& out, const std::string& label, double value, int precision = 2) {
  absl::StrAppendFormat(&out, "%-40s %.*f\n", label, precision, value);
}

void IntRow(std::string& out, const std::string& label, int64_t value) {
  absl::StrAppendFormat(&out, "%-40s %d\n", label, value);
}

void Heading(std::string& out, const std::string& title, char fill) {
  const int pad = kWidth - static_cast<int>(title.size());
  const int left = pad / 2;
  out += std::string(static_cast<size_t>(std::max(left, 0)), fill) + title +
         std::string(static_cast<size_t>(std::max(pad - left, 0)), fill) + "\n";
}

void LatencyRows(std::string& out, const std::string& name, const Summary& s) {
  Row(out, absl::StrCat("Mean ", name, " (ms):"), s.mean);
  Row(out, absl::StrCat("Median ", name, " (ms):"), s.median);
  Row(out, absl::StrCat("P90 ", name, " (ms):"), s.p90);
  Row(out, absl::StrCat("P99 ", name, " (ms):"), s.p99);
}

void AddSummary(nlohmann::json& j, const std::string& name, const Summary& s) {
  j[absl::StrCat("mean_", name, "_ms")] = s.mean;
  j[absl::StrCat("median_", name, "_ms")] = s.median;
  j[absl::StrCat("std_", name, "_ms")] = s.stddev;
  j[absl::StrCat("p90_", name, "_ms")] = s.p90;
  j[absl::StrCat("p99_", name, "_ms")] = s.p99;
}

}  // namespace

std::string FormatTable(const BenchMetrics& m, bool with_goodput) {
  std::string out;
  Heading(out, " Serving Benchmark Result ", '=');
  IntRow(out, "Successful requests:", m.completed);
  if (m.failed > 0) IntRow(out, "Failed requests:", m.failed);
  Row(out, "Benchmark duration (s):", m.duration);
  IntRow(out, "Total input tokens:", m.total_input_tokens);
  IntRow(out, "Total generated tokens:", m.total_output_tokens);
  Row(out, "Request throughput (req/s):", m.request_throughput);
  if (with_goodput) Row(out, "Request goodput (req/s):", m.request_goodput);
  Row(out, "Output token throughput (tok/s):", m.output_throughput);
  Row(out, "Total token throughput (tok/s):", m.total_token_throughput);
  Heading(out, "Time to First Token", '-');
  LatencyRows(out, "TTFT", m.ttft_ms);
  Heading(out, "Time per Output Token (excl. 1st token)", '-');
  LatencyRows(out, "TPOT", m.tpot_ms);
  Heading(out, "Inter-token Latency", '-');
  LatencyRows(out, "ITL", m.itl_ms);
  Heading(out, "End-to-end Latency", '-');
  LatencyRows(out, "E2EL", m.e2el_ms);
  out += std::string(kWidth, '=') + "\n";
  return out;
}

std::string ToJson(const BenchMetrics& m, const RunConfig& config) {
  nlohmann::json j;
  j["backend"] = config.backend;
  j["model_id"] = config.model_id;
  j["num_prompts"] = config.num_prompts;
  // JSON has no infinity; vLLM writes the string "inf" for all-at-once.
  if (std::isinf(config.request_rate)) {
    j["request_rate"] = "inf";
  } else {
    j["request_rate"] = config.request_rate;
  }
  if (config.max_concurrency > 0) {
    j["max_concurrency"] = config.max_concurrency;
  } else {
    j["max_concurrency"] = nullptr;
  }
  j["dataset"] = config.dataset;
  j["seed"] = config.seed;
  j["duration"] = m.duration;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput;
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  AddSummary(j, "ttft", m.ttft_ms);
  AddSummary(j, "tpot", m.tpot_ms);
  AddSummary(j, "itl", m.itl_ms);
  AddSummary(j, "e2el", m.e2el_ms);
  return j.dump(2) + "\n";
}

}  // namespace loom::bench
