#include "tests/scheduler/scheduler_harness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace loom::testing {

RequestParams MakeRequest(int32_t len, int32_t max_tokens, uint64_t salt) {
  RequestParams params;
  params.request_id = absl::StrCat("req-", salt, "-", len);
  for (int32_t i = 0; i < len; ++i) {
    params.prompt_token_ids.push_back(
        10 + static_cast<int32_t>((salt * 7919 + static_cast<uint64_t>(i) * 31) % 900));
  }
  params.stopping.max_tokens = max_tokens;
  params.sampling.seed = salt;
  return params;
}

SchedulerHarness::SchedulerHarness(const Options& options)
    : options_(options),
      cache_(std::make_unique<KvCacheManager>(options.cache)),
      scheduler_(std::make_unique<Scheduler>(options.scheduler, cache_.get())),
      executor_(options.cache.num_blocks, options.cache.block_size, options.token_fn) {}

RequestHandle SchedulerHarness::Add(RequestParams params) {
  const int32_t n = params.n;
  absl::StatusOr<RequestHandle> handle = scheduler_->AddRequest(std::move(params));
  EXPECT_TRUE(handle.ok()) << handle.status();
  if (!handle.ok()) {
    return 0;
  }
  outputs_[*handle].resize(static_cast<size_t>(n));
  return *handle;
}

std::string SchedulerHarness::Step() {
  ++num_steps;
  const StepPlan plan = scheduler_->Schedule(now_);
  EXPECT_LE(plan.num_scheduled_tokens, options_.scheduler.max_num_batched_tokens);
  EXPECT_LE(static_cast<int32_t>(plan.seqs.size()), options_.scheduler.max_num_seqs);
  EXPECT_LE(scheduler_->num_running(), options_.scheduler.max_num_seqs);
  std::vector<std::string> parts;
  for (const ScheduledSeq& seq : plan.seqs) {
    const std::span<const BlockId> table = cache_->BlockTable(seq.seq_id);
    EXPECT_TRUE(std::ranges::equal(seq.block_table, table))
        << "the plan's block table of seq " << seq.seq_id << " is not the cache's";
    parts.push_back(absl::StrCat(seq.seq_id / kMaxSamplesPerRequest, ".",
                                 seq.seq_id % kMaxSamplesPerRequest, ":", seq.num_computed_tokens,
                                 "+", seq.num_scheduled_tokens, seq.sample ? "*" : ""));
  }
  if (on_plan_) {
    on_plan_(plan);
  }
  StepResult result = executor_.Execute(plan);
  if (options_.reverse_sampled) {
    std::ranges::reverse(result.sampled);
  }
  UpdateOutput output = scheduler_->Update(result);
  for (NewToken& token : output.new_tokens) {
    SampleOutput& out = outputs_.at(token.handle).at(token.index);
    EXPECT_EQ(out.reason, FinishReason::kNone) << "token after the end of " << token.handle;
    out.tokens.push_back(token.token_id);
    out.logprobs.push_back(token.logprob);
    out.num_top.push_back(token.top.size());
    out.last_token_time = now_;
  }
  for (FinishedSeq& f : output.finished) {
    SampleOutput& out = outputs_.at(f.handle).at(f.index);
    out.reason = f.reason;
    out.stop_reason = f.stop_reason;
    finished.push_back(std::move(f));
  }
  for (const StartedRequest& s : output.started) {
    started.push_back(s);
  }
  for (RequestHandle h : scheduler_->TakeExpired()) {
    expired.push_back(h);
  }
  cache_->CheckInvariants();
  scheduler_->CheckInvariants();
  now_ += options_.step_time;
  return absl::StrJoin(parts, " ");
}

std::vector<std::string> SchedulerHarness::Run(int32_t max_steps) {
  std::vector<std::string> timeline;
  for (int32_t i = 0; i < max_steps && scheduler_->HasUnfinished(); ++i) {
    timeline.push_back(Step());
  }
  EXPECT_FALSE(scheduler_->HasUnfinished()) << "not done after " << max_steps << " steps";
  return timeline;
}

const std::vector<SampleOutput>& SchedulerHarness::outputs(RequestHandle handle) const {
  return outputs_.at(handle);
}

}  // namespace loom::testing
