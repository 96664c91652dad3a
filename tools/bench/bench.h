// `loom bench`: the serving benchmark of BENCHMARKS.md §1 against any loomd.
// Sends a seeded dataset with Poisson arrivals over GenerateStream (ignore_eos,
// so output lengths are exact) and reports vLLM benchmark_serving's metrics.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>

#include "grpcpp/channel.h"

namespace loom::bench {

struct BenchOptions {
  int num_prompts = 200;
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;         // 0 = unbounded
  std::string dataset = "random";  // or a JSONL file of {"prompt", "output_len"}
  int input_len = 256;
  int output_len = 128;
  double range_ratio = 0;
  uint64_t seed = 0;
  std::string slo;        // e.g. "ttft=500ms,tpot=50ms"
  std::string json_path;  // write the result here when set
};

// Prints the result table to out and progress and errors to err. Returns the
// exit code: 0 when every request succeeded, 1 otherwise, 2 for bad options.
int Bench(const std::shared_ptr<grpc::Channel>& channel, const BenchOptions& options,
          std::ostream& out, std::ostream& err);

// Bench() with the options read from the command line's flags (bench_flags.cc).
int BenchFromFlags(const std::shared_ptr<grpc::Channel>& channel, std::ostream& out,
                   std::ostream& err);

}  // namespace loom::bench
