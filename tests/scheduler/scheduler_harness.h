// Drives a Scheduler with a FakeExecutor and an injected clock, one step at a
// time, and records what each sample produced and a timeline of the plans.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "cache/kv_cache_manager.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/fake_executor.h"
#include "types/request_params.h"

namespace loom::testing {

struct SampleOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<size_t> num_top;  // top-logprob entries per token
  FinishReason reason = FinishReason::kNone;
  std::string stop_reason;
  absl::Time last_token_time = absl::InfinitePast();  // `now` of the step that made it
};

// A request with a prompt of `len` tokens drawn from `salt`, so that equal
// salts give equal prompts (for prefix-cache hits).
RequestParams MakeRequest(int32_t len, int32_t max_tokens, uint64_t salt = 0);

class SchedulerHarness {
 public:
  struct Options {
    SchedulerConfig scheduler;
    KvCacheConfig cache{.num_blocks = 64, .block_size = 4, .enable_prefix_caching = false};
    TokenFn token_fn = HashToken;
    absl::Duration step_time = absl::Milliseconds(10);
    // Return the sampled tokens in reverse plan order, as an executor may.
    bool reverse_sampled = false;
  };

  explicit SchedulerHarness(const Options& options);

  // AddRequest, failing the test on an error.
  RequestHandle Add(RequestParams params);

  // One Schedule/Execute/Update round; then the clock advances by step_time.
  // Returns the plan as "handle.index:computed+scheduled", '*' when it samples,
  // space-separated in plan order (e.g. "1.0:0+4 2.0:5+1*").
  std::string Step();
  // Steps until no request is left (at most max_steps); returns the timeline.
  std::vector<std::string> Run(int32_t max_steps = 100000);

  [[nodiscard]] const std::vector<SampleOutput>& outputs(RequestHandle handle) const;
  [[nodiscard]] std::vector<int32_t> tokens(RequestHandle handle, uint32_t index = 0) const {
    return outputs(handle).at(index).tokens;
  }
  [[nodiscard]] FinishReason reason(RequestHandle handle, uint32_t index = 0) const {
    return outputs(handle).at(index).reason;
  }

  Scheduler& scheduler() { return *scheduler_; }
  KvCacheManager& cache() { return *cache_; }
  absl::Time now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }
  // Called after Schedule, before Execute (to act while a plan is in flight).
  void set_on_plan(std::function<void(const StepPlan&)> f) { on_plan_ = std::move(f); }

  std::vector<RequestHandle> expired;
  std::vector<StartedRequest> started;
  std::vector<FinishedSeq> finished;
  int64_t num_steps = 0;

 private:
  Options options_;
  std::unique_ptr<KvCacheManager> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  FakeExecutor executor_;
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  absl::flat_hash_map<RequestHandle, std::vector<SampleOutput>> outputs_;
  std::function<void(const StepPlan&)> on_plan_;
};

}  // namespace loom::testing
