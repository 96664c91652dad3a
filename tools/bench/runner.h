// Sends a benchmark's requests at their arrival times, with at most
// max_concurrency in flight, and returns what each one measured. Requests are
// started asynchronously (no thread per request) by a backend: gRPC's callback
// API or the HTTP client.
#pragma once

#include <cstdint>
#include <functional>
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

// A backend calls it once per request, from any thread, when the request is
// over: what it measured, and "" or the error that failed it.
using RequestDone = std::function<void(RequestRecord record, std::string error)>;
// Starts request `index` and returns without waiting for it.
using StartRequest = std::function<void(size_t index, RequestDone done)>;

// arrivals[i] is request i's offset in seconds from the start (non-decreasing);
// max_concurrency <= 0 means unbounded.
RunResult RunRequests(size_t count, const StartRequest& start, const std::vector<double>& arrivals,
                      int max_concurrency);

// RunRequests over GenerateStream calls.
RunResult RunRequests(v1::GenerationService::Stub& stub,
                      const std::vector<v1::GenerateRequest>& requests,
                      const std::vector<double>& arrivals, int max_concurrency);

}  // namespace loom::bench
