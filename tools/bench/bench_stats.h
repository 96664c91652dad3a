// The statistics of `loom bench` (BENCHMARKS.md §1), with vLLM
// benchmark_serving's definitions so that numbers compare: TTFT, TPOT
// ((e2e - ttft) / (out_len - 1)), ITL (every gap between streamed messages),
// E2E latency, throughputs and goodput under an SLO.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom::bench {

// What one request of a run measured; times in seconds.
struct RequestRecord {
  bool ok = false;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double ttft = 0;           // request start to first token
  double e2el = 0;           // request start to the end of the stream
  std::vector<double> itls;  // gaps between consecutive token-carrying messages
};

// mean, median, standard deviation (population) and percentiles of a sample.
struct Summary {
  double mean = 0;
  double median = 0;
  double stddev = 0;
  double p90 = 0;
  double p99 = 0;
};

// Percentile with linear interpolation between closest ranks (numpy's
// default), p in [0, 100]; 0 for an empty sample. `sorted` is ascending.
double Percentile(std::span<const double> sorted, double p);

// All zero for an empty sample.
Summary Summarize(std::vector<double> values);

// Service-level objectives for goodput; unset ones always hold. Milliseconds.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
};

// "ttft=500ms,tpot=50ms" (keys ttft, tpot, e2el; values absl durations).
absl::StatusOr<Slo> ParseSlo(absl::string_view text);

struct BenchMetrics {
  double duration = 0;  // seconds
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // completed / s
  double output_throughput = 0;       // output tokens / s
  double total_token_throughput = 0;  // (input + output) tokens / s
  int64_t good_requests = 0;          // completed and within every SLO
  double request_goodput = 0;         // good_requests / s
  // In milliseconds.
  Summary ttft_ms;
  Summary tpot_ms;
  Summary itl_ms;
  Summary e2el_ms;
};

// Failed requests only count in `failed`. TPOT is taken over requests with
// more than one output token; for goodput a one-token request meets any TPOT.
BenchMetrics ComputeMetrics(std::span<const RequestRecord> records, double duration,
                            const Slo& slo);

}  // namespace loom::bench
