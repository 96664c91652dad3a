// Scheduler step cost: microseconds per Schedule() + Update() with N running
// sequences in steady state (decodes plus the prefill chunks of requests that
// replace finished ones) and a waiting queue of N/4, against a result built
// like a FakeExecutor's (one token per sampling sequence), with the KV cache's
// prefix caching on (the default) and off. The time is that of the two calls,
// including the cache calls the scheduler makes; the executor's and the
// client's work around them is not timed. Anchor: vLLM v1's Python scheduler takes about 100 us
// per step (BENCHMARKS.md section 2).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "cache/kv_cache_manager.h"
#include "scheduler/scheduler.h"

namespace loom {
namespace {

constexpr int32_t kPromptLen = 128;
constexpr int32_t kBlockSize = 16;

class Workload {
 public:
  Workload(int32_t num_running, bool prefix_caching)
      : cache_(KvCacheConfig{.num_blocks = num_running * 30 + 1,
                             .block_size = kBlockSize,
                             .enable_prefix_caching = prefix_caching}),
        scheduler_(SchedulerConfig{.max_num_seqs = num_running,
                                   .max_num_batched_tokens = 8192,
                                   .max_model_len = 4096,
                                   .max_queued_requests = 2 * num_running,
                                   .eos_token_ids = {2}},
                   &cache_) {
    for (int32_t& t : token_pool_) {
      t = static_cast<int32_t>(rng_() % 30000) + 3;
    }
    for (int32_t i = 0; i < num_running + num_running / 4; ++i) {
      Add();
    }
    // Warm up until the slots are (nearly: some free up every step) full,
    // then past the last prompts' chunks.
    while (scheduler_.num_running() < num_running - num_running / 32) {
      Step();
    }
    for (int32_t i = 0; i < 16; ++i) {
      Step();
    }
  }

  struct StepStats {
    int32_t num_tokens;  // scheduled in the step
    double seconds;      // spent in Schedule and Update
  };

  // One step. Only the scheduler's two calls are timed: building the
  // executor's result, adding requests and destroying the plan and the output
  // are the engine's work.
  StepStats Step() {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point schedule_start = Clock::now();
    const StepPlan plan = scheduler_.Schedule(now_);
    const Clock::duration schedule_time = Clock::now() - schedule_start;
    result_.sampled.clear();
    for (const ScheduledSeq& seq : plan.seqs) {
      if (!seq.sample) {
        continue;
      }
      SampledToken& token = result_.sampled.emplace_back();
      token.seq_id = seq.seq_id;
      token.token_id = 3 + static_cast<int32_t>((seq.seq_id * 31 + seq.num_computed_tokens) % 997);
      token.logprob = -1.0F;
    }
    const Clock::time_point update_start = Clock::now();
    const UpdateOutput output = scheduler_.Update(result_);
    const Clock::duration update_time = Clock::now() - update_start;
    for (const FinishedSeq& finished : output.finished) {
      if (finished.request_finished) {
        Add();
      }
    }
    now_ += absl::Milliseconds(10);
    return StepStats{.num_tokens = plan.num_scheduled_tokens,
                     .seconds = std::chrono::duration<double>(schedule_time + update_time).count()};
  }

  Scheduler& scheduler() { return scheduler_; }

 private:
  void Add() {
    RequestParams params;
    // A random window of a random pool: distinct prompts at memcpy cost.
    const size_t offset = rng_() % (token_pool_.size() - kPromptLen);
    params.prompt_token_ids.assign(
        token_pool_.begin() + static_cast<std::ptrdiff_t>(offset),
        token_pool_.begin() + static_cast<std::ptrdiff_t>(offset + kPromptLen));
    params.stopping.max_tokens = static_cast<int32_t>(rng_() % 256) + 64;
    params.stopping.ignore_eos = true;
    params.sampling.seed = rng_();
    benchmark::DoNotOptimize(scheduler_.AddRequest(std::move(params)));
  }

  KvCacheManager cache_;
  Scheduler scheduler_;
  StepResult result_;
  std::vector<int32_t> token_pool_ = std::vector<int32_t>(1 << 16);
  std::mt19937_64 rng_{7};
  absl::Time now_ = absl::UnixEpoch();
};

}  // namespace

void BM_ScheduleUpdate(benchmark::State& state) {
  const auto num_running = static_cast<int32_t>(state.range(0));
  Workload workload(num_running, /*prefix_caching=*/state.range(1) != 0);
  int64_t tokens = 0;
  int64_t running = 0;
  for (auto _ : state) {
    const Workload::StepStats step = workload.Step();
    state.SetIterationTime(step.seconds);
    tokens += step.num_tokens;
    running += workload.scheduler().num_running();
  }
  const auto steps = static_cast<double>(state.iterations());
  state.counters["running"] = static_cast<double>(running) / steps;
  state.counters["waiting"] = workload.scheduler().num_waiting();
  state.counters["tokens_per_step"] = static_cast<double>(tokens) / steps;
}

}  // namespace loom

// LOOM_SCHED_BENCH_STEPS=N runs every case for exactly N steps instead of
// for a time, so that profiles under a cache simulator are reproducible.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::internal::Benchmark* bench =
      benchmark::RegisterBenchmark("BM_ScheduleUpdate", loom::BM_ScheduleUpdate)
          ->ArgsProduct({{64, 256, 1024, 4096}, {1, 0}})
          ->ArgNames({"running", "prefix_caching"})
          ->Unit(benchmark::kMicrosecond)
          ->UseManualTime();
  if (const char* steps = std::getenv("LOOM_SCHED_BENCH_STEPS"); steps != nullptr) {
    bench->Iterations(std::atoll(steps));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
