// A randomized simulation: thousands of requests with random lengths,
// priorities, samples, stopping rules, cancellations, engine-side stops and
// deadlines arrive over time at a tiny KV pool that forces preemption. Every
// sample must end exactly as in an unconstrained run on a big pool (same
// tokens, reason and stop reason) unless it was cut short, in which case its
// tokens are a prefix of that run's; expired requests must not get tokens
// after their deadline; no block may leak; and requests start in key order
// (the fairness rule of scheduler.h).
#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/scheduler/scheduler_harness.h"

namespace loom::testing {
namespace {

constexpr int32_t kNumRequests = 2000;
constexpr int32_t kMaxModelLen = 64;
constexpr int32_t kEosOneIn = 24;

struct SimRequest {
  RequestParams params;
  int32_t arrival_step = 0;
  int32_t abort_step = -1;       // AbortRequest before this step
  bool abort_in_flight = false;  // ... or while this step's plan is in flight
  int32_t finish_step = -1;      // FinishSeq(finish_index) before this step (a stop string)
  uint32_t finish_index = 0;
  absl::Duration deadline_after = absl::InfiniteDuration();  // after arrival
};

std::vector<SimRequest> MakeWorkload(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&rng](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  const auto chance = [&rng](double p) { return std::bernoulli_distribution(p)(rng); };
  // Shared prefixes so that prefix caching finds hits across requests.
  std::vector<std::vector<int32_t>> prefixes;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> prefix;
    for (int32_t j = uniform(6, 14); j > 0; --j) {
      prefix.push_back(uniform(3, kFakeVocabSize - 1));
    }
    prefixes.push_back(prefix);
  }
  std::vector<SimRequest> workload;
  int32_t step = 0;
  for (int32_t i = 0; i < kNumRequests; ++i) {
    if (chance(0.45)) {
      ++step;  // about two arrivals a step, in bursts
    }
    SimRequest r;
    r.arrival_step = step;
    RequestParams& p = r.params;
    p.request_id = absl::StrCat("sim-", i);
    if (chance(0.5)) {
      p.prompt_token_ids = prefixes[static_cast<size_t>(uniform(0, 3))];
    }
    for (int32_t j = uniform(1, 30); j > 0; --j) {
      p.prompt_token_ids.push_back(uniform(3, kFakeVocabSize - 1));
    }
    p.cache_salt = chance(0.2) ? "tenant-b" : "";
    p.sampling.seed = rng();
    p.sampling.num_logprobs = chance(0.1) ? 2 : -1;
    p.stopping.max_tokens = uniform(1, 30);
    p.stopping.min_tokens = chance(0.2) ? uniform(0, p.stopping.max_tokens) : 0;
    p.stopping.ignore_eos = chance(0.2);
    if (chance(0.2)) {
      p.stopping.stop_token_ids = {uniform(3, 40), uniform(3, 40)};
    }
    p.n = chance(0.15) ? 2 : 1;
    p.priority = uniform(0, 3);
    if (chance(0.1)) {
      r.abort_step = r.arrival_step + uniform(0, 40);
      r.abort_in_flight = chance(0.5);
    }
    if (chance(0.1)) {
      r.finish_step = r.arrival_step + uniform(1, 40);
      r.finish_index = static_cast<uint32_t>(uniform(0, p.n - 1));
    }
    if (chance(0.15)) {
      r.deadline_after = absl::Milliseconds(uniform(0, 400));
    }
    workload.push_back(std::move(r));
  }
  return workload;
}

// The unconstrained run: a big pool and no cancellations or deadlines.
std::vector<std::vector<SampleOutput>> ReferenceRun(const std::vector<SimRequest>& workload) {
  SchedulerHarness::Options options;
  options.scheduler.max_num_seqs = 256;
  options.scheduler.max_num_batched_tokens = 4096;
  options.scheduler.max_model_len = kMaxModelLen;
  options.scheduler.max_queued_requests = kNumRequests * 2;
  options.scheduler.eos_token_ids = {kFakeEosToken};
  options.cache = {.num_blocks = 8000, .block_size = 4, .enable_prefix_caching = false};
  options.token_fn = HashTokenWithEos(kEosOneIn);
  SchedulerHarness h(options);
  std::vector<RequestHandle> handles;
  handles.reserve(workload.size());
  for (const SimRequest& r : workload) {
    handles.push_back(h.Add(r.params));
  }
  h.Run();
  EXPECT_EQ(h.scheduler().num_preemptions(), 0);
  std::vector<std::vector<SampleOutput>> outputs;
  outputs.reserve(handles.size());
  for (RequestHandle handle : handles) {
    outputs.push_back(h.outputs(handle));
  }
  return outputs;
}

// The key a request's first sample is ordered by (scheduler.h).
struct Key {
  absl::Time rank;
  RequestHandle handle;
  friend bool operator<(const Key& a, const Key& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.handle < b.handle;
  }
};

Key KeyOf(const SchedulerConfig& config, const RequestParams& params, RequestHandle handle) {
  absl::Time rank = absl::UnixEpoch();
  if (config.policy == SchedulingPolicy::kPriority) {
    rank = params.arrival_time + config.priority_aging * params.priority;
  } else if (config.policy == SchedulingPolicy::kShortestPrompt) {
    rank = params.arrival_time +
           config.prompt_token_aging * static_cast<int64_t>(params.prompt_token_ids.size());
  }
  return {rank, handle};
}

// No request starts while one with a smaller key waits: whenever request j
// is first scheduled, every request that had arrived and starts later has a
// greater key. (A request that never starts, aborted or expired, left the
// queue without being passed over for good.)
void ExpectStartsInKeyOrder(const SchedulerHarness& h,
                            const absl::flat_hash_map<RequestHandle, absl::Time>& arrival,
                            const absl::flat_hash_map<RequestHandle, Key>& key) {
  absl::flat_hash_map<RequestHandle, absl::Time> start;
  for (const StartedRequest& s : h.started) start[s.handle] = s.scheduled_time;
  int failures = 0;
  for (const StartedRequest& j : h.started) {
    for (const auto& [i, i_start] : start) {
      if (i_start <= j.scheduled_time || arrival.at(i) > j.scheduled_time) continue;
      if (!(key.at(j.handle) < key.at(i)) && ++failures <= 10) {
        ADD_FAILURE() << "request " << j.handle << " started before waiting request " << i
                      << " with a smaller key";
      }
    }
  }
}

using SimParam = std::tuple<SchedulingPolicy, AdmissionPolicy, bool /*prefix caching*/>;

class SimulationTest : public ::testing::TestWithParam<SimParam> {};

TEST_P(SimulationTest, EveryRequestEndsAsInAnUnconstrainedRun) {
  const auto [policy, admission, prefix_caching] = GetParam();
  const std::vector<SimRequest> workload = MakeWorkload(/*seed=*/42);
  const std::vector<std::vector<SampleOutput>> reference = ReferenceRun(workload);

  SchedulerHarness::Options options;
  options.scheduler.max_num_seqs = 16;
  options.scheduler.max_num_batched_tokens = 48;
  options.scheduler.max_model_len = kMaxModelLen;
  options.scheduler.max_queued_requests = kNumRequests * 2;
  options.scheduler.policy = policy;
  options.scheduler.admission = admission;
  options.scheduler.long_prefill_token_threshold = 20;
  options.scheduler.max_num_partial_prefills = 2;
  options.scheduler.priority_aging = absl::Milliseconds(50);
  options.scheduler.prompt_token_aging = absl::Milliseconds(5);
  options.scheduler.eos_token_ids = {kFakeEosToken};
  // 39 usable blocks of 4 tokens: 16 sequences of up to 64 tokens overcommit it.
  options.cache = {.num_blocks = 40, .block_size = 4, .enable_prefix_caching = prefix_caching};
  options.token_fn = HashTokenWithEos(kEosOneIn);
  // Under the priority policy the executor returns its tokens in reverse
  // plan order, which the scheduler matches by seq id instead of in one pass.
  options.reverse_sampled = policy == SchedulingPolicy::kPriority;
  SchedulerHarness h(options);

  std::vector<RequestHandle> handles(workload.size(), 0);
  absl::flat_hash_map<RequestHandle, size_t> index_of;
  absl::flat_hash_map<RequestHandle, absl::Time> arrival;
  absl::flat_hash_map<RequestHandle, Key> key;
  std::vector<absl::Time> deadlines(workload.size(), absl::InfiniteFuture());
  std::vector<bool> cut_short(workload.size(), false);
  std::vector<std::vector<bool>> engine_finished(workload.size());
  size_t next = 0;
  int32_t step = 0;
  while (next < workload.size() || h.scheduler().HasUnfinished()) {
    ASSERT_LT(step, 200000) << "the simulation does not terminate";
    for (; next < workload.size() && workload[next].arrival_step <= step; ++next) {
      RequestParams params = workload[next].params;
      params.arrival_time = h.now();
      if (workload[next].deadline_after != absl::InfiniteDuration()) {
        params.deadline = h.now() + workload[next].deadline_after;
        deadlines[next] = params.deadline;
      }
      const RequestParams added = params;
      handles[next] = h.Add(std::move(params));
      ASSERT_NE(handles[next], 0U);
      index_of[handles[next]] = next;
      arrival[handles[next]] = added.arrival_time;
      key[handles[next]] = KeyOf(options.scheduler, added, handles[next]);
      engine_finished[next].assign(static_cast<size_t>(workload[next].params.n), false);
    }
    std::vector<RequestHandle> in_flight_aborts;
    for (size_t i = 0; i < next; ++i) {
      const SimRequest& r = workload[i];
      if (r.abort_step == step) {
        cut_short[i] = true;
        if (r.abort_in_flight) {
          in_flight_aborts.push_back(handles[i]);
        } else {
          h.scheduler().AbortRequest(handles[i]);
        }
      }
      if (r.finish_step == step && h.reason(handles[i], r.finish_index) == FinishReason::kNone) {
        h.scheduler().FinishSeq(handles[i], r.finish_index, FinishReason::kStop);
        engine_finished[i][r.finish_index] = true;
      }
    }
    h.set_on_plan([&](const StepPlan& /*plan*/) {
      for (RequestHandle handle : in_flight_aborts) {
        h.scheduler().AbortRequest(handle);
      }
    });
    h.Step();
    ++step;
  }

  const absl::flat_hash_set<RequestHandle> expired(h.expired.begin(), h.expired.end());
  EXPECT_EQ(expired.size(), h.expired.size()) << "a request expired twice";
  int32_t num_complete = 0;
  for (size_t i = 0; i < workload.size(); ++i) {
    const SimRequest& r = workload[i];
    const std::vector<SampleOutput>& got = h.outputs(handles[i]);
    bool all_ended = true;
    for (size_t s = 0; s < got.size(); ++s) {
      const SampleOutput& want = reference[i][s];
      const SampleOutput& out = got[s];
      SCOPED_TRACE(absl::StrCat("request ", i, " sample ", s));
      if (out.reason != FinishReason::kNone) {
        EXPECT_EQ(out.tokens, want.tokens);
        EXPECT_EQ(out.reason, want.reason);
        EXPECT_EQ(out.stop_reason, want.stop_reason);
        continue;
      }
      all_ended = false;
      ASSERT_LE(out.tokens.size(), want.tokens.size());
      EXPECT_TRUE(std::equal(out.tokens.begin(), out.tokens.end(), want.tokens.begin()));
      EXPECT_TRUE(cut_short[i] || engine_finished[i][s] || expired.contains(handles[i]))
          << "ended without a reason";
    }
    if (all_ended) {
      ++num_complete;
    }
    if (expired.contains(handles[i])) {
      EXPECT_NE(r.deadline_after, absl::InfiniteDuration());
      EXPECT_FALSE(all_ended) << "request " << i << " expired after it ended";
    }
  }
  // Nothing after a deadline: every token came from a step scheduled before it.
  for (size_t i = 0; i < workload.size(); ++i) {
    for (const SampleOutput& out : h.outputs(handles[i])) {
      if (!out.tokens.empty()) {
        EXPECT_LT(out.last_token_time, deadlines[i]) << "request " << i;
      }
    }
  }
  RecordProperty("steps", static_cast<int>(h.num_steps));
  RecordProperty("preemptions", static_cast<int>(h.scheduler().num_preemptions()));
  RecordProperty("expired", static_cast<int>(h.expired.size()));
  RecordProperty("complete", num_complete);
  RecordProperty("prefix_hit_tokens", static_cast<int>(h.cache().Stats().prefix_hit_tokens));
  EXPECT_GT(num_complete, kNumRequests / 2);
  EXPECT_FALSE(h.expired.empty());
  if (admission == AdmissionPolicy::kReserve) {
    EXPECT_EQ(h.scheduler().num_preemptions(), 0);
  } else {
    EXPECT_GT(h.scheduler().num_preemptions(), 0);
  }
  EXPECT_EQ(h.cache().Stats().num_used, 0);
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  h.cache().CheckInvariants();
  ExpectStartsInKeyOrder(h, arrival, key);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, SimulationTest,
    ::testing::Combine(::testing::Values(SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority,
                                         SchedulingPolicy::kShortestPrompt),
                       ::testing::Values(AdmissionPolicy::kOptimistic, AdmissionPolicy::kReserve),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<SimParam>& info) {
      const SchedulingPolicy policy = std::get<0>(info.param);
      return absl::StrCat(
          policy == SchedulingPolicy::kFcfs       ? "Fcfs"
          : policy == SchedulingPolicy::kPriority ? "Priority"
                                                  : "ShortestPrompt",
          std::get<1>(info.param) == AdmissionPolicy::kReserve ? "Reserve" : "Optimistic",
          std::get<2>(info.param) ? "PrefixCaching" : "NoPrefixCaching");
    });

}  // namespace
}  // namespace loom::testing
