#include "tools/bench/runner.h"

#include <chrono>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tools/bench/stream_call.h"

namespace loom::bench {
namespace {

RequestRecord ToRecord(const StreamCall& call) {
  RequestRecord r;
  r.ok = call.status().ok();
  r.input_tokens = call.has_usage() ? call.usage().prompt_tokens() : 0;
  r.output_tokens = call.output_tokens();
  r.ttft = call.ttft();
  r.e2el = call.e2el();
  r.itls = call.itls();
  return r;
}

}  // namespace

RunResult RunRequests(v1::GenerationService::Stub& stub,
                      const std::vector<v1::GenerateRequest>& requests,
                      const std::vector<double>& arrivals, int max_concurrency) {
  absl::Mutex mu;
  int64_t in_flight = 0;
  size_t finished = 0;
  std::vector<std::unique_ptr<StreamCall>> calls;
  calls.reserve(requests.size());

  const auto start = std::chrono::steady_clock::now();
  const absl::Time wall_start = absl::Now();
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::SleepFor(wall_start + absl::Seconds(arrivals[i]) - absl::Now());
    {
      absl::MutexLock lock(&mu);
      auto has_room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return max_concurrency <= 0 || in_flight < max_concurrency;
      };
      mu.Await(absl::Condition(&has_room));
      ++in_flight;
    }
    calls.push_back(
        std::make_unique<StreamCall>(requests[i], StreamCall::Options{}, [&](StreamCall&) {
          absl::MutexLock lock(&mu);
          --in_flight;
          ++finished;
        }));
    calls.back()->Start(stub);
  }
  {
    absl::MutexLock lock(&mu);
    auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return finished == requests.size(); };
    mu.Await(absl::Condition(&all_done));
  }
  RunResult result;
  result.duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::unique_ptr<StreamCall>& call : calls) {
    result.records.push_back(ToRecord(*call));
    if (!call->status().ok()) {
      ++result.errors[absl::StrCat(call->status().error_code(), ": ",
                                   call->status().error_message())];
    }
  }
  return result;
}

}  // namespace loom::bench
