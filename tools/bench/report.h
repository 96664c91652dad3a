// How `loom bench` shows a run: a table like vLLM benchmark_serving's, and a
// JSON object with its key names so that existing scripts read our results.
#pragma once

#include <string>

#include "tools/bench/bench_stats.h"

namespace loom::bench {

// What the run was, echoed in the JSON next to the metrics.
struct RunConfig {
  std::string backend = "loom";  // loom, openai or openai-chat
  std::string model_id;
  int num_prompts = 0;
  double request_rate = 0;  // infinite for all-at-once
  int max_concurrency = 0;  // 0 = unbounded
  std::string dataset;
  uint64_t seed = 0;
};

std::string FormatTable(const BenchMetrics& m, bool with_goodput);

// duration, completed, total_input_tokens, total_output_tokens,
// request_throughput, output_throughput, total_token_throughput,
// request_goodput, {mean,median,std,p90,p99}_{ttft,tpot,itl,e2el}_ms.
std::string ToJson(const BenchMetrics& m, const RunConfig& config);

}  // namespace loom::bench
