// `loom bench`: the serving benchmark of BENCHMARKS.md §1. Sends a seeded
// dataset with Poisson arrivals (greedy, ignore_eos, so output lengths are
// exact) through a backend, loomd's gRPC or any OpenAI-compatible HTTP server,
// and reports vLLM benchmark_serving's metrics.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/backend.h"

namespace loom::bench {

enum class BackendKind { kLoom, kOpenAi, kOpenAiChat };
// "loom", "openai" or "openai-chat".
absl::StatusOr<BackendKind> ParseBackend(absl::string_view name);

struct BenchOptions {
  std::string backend_name = "loom";  // echoed in the JSON
  int num_prompts = 200;
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;         // 0 = unbounded
  std::string dataset = "random";  // or a JSONL file of {"prompt", "output_len"}
  int input_len = 256;
  int output_len = 128;
  double range_ratio = 0;
  uint64_t seed = 0;
  int32_t vocab_size = 0;  // random token ids below it; 0 = as the server reports
  std::string slo;         // e.g. "ttft=500ms,tpot=50ms"
  std::string json_path;   // write the result here when set
};

// Prints the result table to out and progress and errors to err. Returns the
// exit code: 0 when every request succeeded, 1 otherwise, 2 for bad options.
int Bench(Backend& backend, const BenchOptions& options, std::ostream& out, std::ostream& err);

// Bench() against --target with the backend and options of the command
// line's flags (bench_flags.cc).
int BenchFromFlags(const std::string& target, std::ostream& out, std::ostream& err);

}  // namespace loom::bench
