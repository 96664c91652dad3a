// Sends a benchmark's requests at their arrival times, with at most
// max_concurrency in flight, over the callback API (no thread per request),
// and returns what each one measured.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loom/v1/generation.grpc.pb.h"
#include "tools/bench/bench_stats.h"

namespace loom::bench {

struct RunResult {
  std::vector<RequestRecord> records;     // in request order
  double duration = 0;                    // seconds from the first send to the last end
  std::map<std::string, int64_t> errors;  // "CODE: message" -> count
};

// arrivals[i] is request i's offset in seconds from the start (non-decreasing);
// max_concurrency <= 0 means unbounded.
RunResult RunRequests(v1::GenerationService::Stub& stub,
                      const std::vector<v1::GenerateRequest>& requests,
                      const std::vector<double>& arrivals, int max_concurrency);

}  // namespace loom::bench
