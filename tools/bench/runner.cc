#include "tools/bench/runner.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "tools/bench/stream_call.h"

namespace loom::bench {

RunResult RunRequests(size_t count, const StartRequest& start, const std::vector<double>& arrivals,
                      int max_concurrency) {
  // loom::Mutex, not absl::Mutex: the tsan build sees its ordering
  // (base/mutex.h). Callbacks notify under the lock, so the condition
  // variable outlives every notification.
  Mutex mu;
  CondVar changed;
  int64_t in_flight = 0;
  size_t finished = 0;
  RunResult result;
  result.records.resize(count);
  std::vector<std::string> errors(count);

  const auto start_time = std::chrono::steady_clock::now();
  const absl::Time wall_start = absl::Now();
  for (size_t i = 0; i < count; ++i) {
    absl::SleepFor(wall_start + absl::Seconds(arrivals[i]) - absl::Now());
    {
      MutexLock lock(mu);
      while (max_concurrency > 0 && in_flight >= max_concurrency) changed.Wait(mu);
      ++in_flight;
    }
    start(i, [&, i](RequestRecord record, std::string error) {
      MutexLock lock(mu);
      result.records[i] = std::move(record);
      errors[i] = std::move(error);
      --in_flight;
      ++finished;
      changed.NotifyAll();
    });
  }
  {
    MutexLock lock(mu);
    while (finished != count) changed.Wait(mu);
  }
  result.duration =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  for (const std::string& error : errors) {
    if (!error.empty()) ++result.errors[error];
  }
  return result;
}

RunResult RunRequests(v1::GenerationService::Stub& stub,
                      const std::vector<v1::GenerateRequest>& requests,
                      const std::vector<double>& arrivals, int max_concurrency) {
  // Each call lives until RunRequests returned, after its OnDone.
  std::vector<std::unique_ptr<StreamCall>> calls(requests.size());
  auto start = [&](size_t i, RequestDone done) {
    calls[i] = std::make_unique<StreamCall>(
        requests[i], StreamCall::Options{},
        [done = std::move(done)](StreamCall& call) { done(ToRecord(call), ErrorOf(call)); });
    calls[i]->Start(stub);
  };
  return RunRequests(requests.size(), start, arrivals, max_concurrency);
}

}  // namespace loom::bench
