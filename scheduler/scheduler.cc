#include "scheduler/scheduler.h"

#include <algorithm>
#include <ranges>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/check.h"

namespace loom {
namespace {

// How many sequences ahead the per-step loops prefetch: with thousands of
// running sequences their records are out of cache, and one miss per sequence
// would dominate the step.
constexpr size_t kPrefetchDistance = 8;

// The record's first two cache lines hold every field a step reads.
void PrefetchSeq(const Sequence* seq) {
  __builtin_prefetch(seq);
  __builtin_prefetch(reinterpret_cast<const char*>(seq) + 64);
}

int32_t CapModelLen(int32_t max_model_len, int32_t num_blocks, int32_t block_size) {
  return static_cast<int32_t>(
      std::min<int64_t>(max_model_len, static_cast<int64_t>(num_blocks) * block_size));
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* cache)
    : config_(config),
      cache_(cache),
      block_size_(cache->block_size()),
      num_usable_blocks_(cache->Stats().num_blocks),
      max_model_len_(CapModelLen(config.max_model_len, num_usable_blocks_, block_size_)) {
  LOOM_SCHEDULER_CHECK(config_.max_model_len > 0) << "max_model_len is required";
  LOOM_SCHEDULER_CHECK(config_.max_num_seqs > 0);
  // Every running decode must fit in one step next to the oldest prefill
  // chunk, or that prefill could be passed over.
  LOOM_SCHEDULER_CHECK(config_.max_num_batched_tokens >= config_.max_num_seqs);
  LOOM_SCHEDULER_CHECK(config_.long_prefill_token_threshold >= 0);
  LOOM_SCHEDULER_CHECK(config_.priority_aging > absl::ZeroDuration());
}

absl::StatusOr<RequestHandle> Scheduler::AddRequest(RequestParams params) {
  if (num_waiting() >= config_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat("waiting queue holds ", num_waiting(),
                                                     " requests; the limit is ",
                                                     config_.max_queued_requests));
  }
  const auto num_prompt_tokens = static_cast<int32_t>(params.prompt_token_ids.size());
  if (num_prompt_tokens == 0) {
    return absl::InvalidArgumentError("prompt is empty");
  }
  if (num_prompt_tokens >= max_model_len_) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", num_prompt_tokens,
                                                   " tokens; max_model_len is ", max_model_len_,
                                                   " and must leave room for one generated token"));
  }
  const int32_t max_n = std::min(kMaxSamplesPerRequest, config_.max_num_seqs);
  if (params.n < 1 || params.n > max_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("n is ", params.n, "; the allowed range is 1..", max_n));
  }
  const StoppingParams& stopping = params.stopping;
  if (stopping.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens is ", stopping.max_tokens, "; it must be at least 1"));
  }
  if (stopping.min_tokens < 0 || stopping.min_tokens > stopping.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens is ", stopping.min_tokens,
                                                   "; the allowed range is 0..max_tokens (",
                                                   stopping.max_tokens, ")"));
  }
  const auto max_seq_len = static_cast<int32_t>(std::min<int64_t>(
      static_cast<int64_t>(num_prompt_tokens) + stopping.max_tokens, max_model_len_));
  if (config_.admission == AdmissionPolicy::kReserve &&
      static_cast<int64_t>(params.n) * BlocksFor(max_seq_len) > num_usable_blocks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt + max_tokens of ", params.n, " samples need ", params.n * BlocksFor(max_seq_len),
        " KV blocks; the pool has ", num_usable_blocks_));
  }

  const RequestHandle handle = next_handle_++;
  auto request = std::make_unique<Request>();
  request->handle = handle;
  request->num_prompt_tokens = num_prompt_tokens;
  request->stopping = std::move(params.stopping);
  request->cache_salt = std::move(params.cache_salt);
  request->deadline = params.deadline;
  request->max_seq_len = max_seq_len;
  request->num_unfinished = params.n;
  request->num_pending = params.n - 1;

  absl::Time rank = absl::UnixEpoch();
  if (config_.policy == SchedulingPolicy::kPriority) {
    const absl::Time arrival =
        params.arrival_time == absl::InfinitePast() ? last_now_ : params.arrival_time;
    rank = arrival + config_.priority_aging * params.priority;
  }
  for (int32_t i = 0; i < params.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    const auto index = static_cast<uint32_t>(i);
    seq->seq_id = static_cast<int64_t>(handle) * kMaxSamplesPerRequest + i;
    seq->num_prompt_tokens = num_prompt_tokens;
    seq->index = index;
    seq->stop = StopRules::From(request->stopping);
    seq->cache_salt = request->cache_salt;
    seq->request = request.get();
    seq->key = SeqKey{.rank = rank, .handle = handle, .index = index};
    seq->state = i == 0 ? SeqState::kWaiting : SeqState::kPending;
    seq->token_ids = params.prompt_token_ids;
    seq->sampling = params.sampling;
    seq->sampling.seed = DeriveSampleSeed(params.sampling.seed, index);
    request->seqs.push_back(std::move(seq));
  }
  waiting_.insert(request->seqs[0].get());
  if (request->deadline != absl::InfiniteFuture()) {
    deadlines_.emplace(request->deadline, handle);
  }
  requests_.emplace(handle, std::move(request));
  return handle;
}

StepPlan Scheduler::Schedule(absl::Time now) {
  LOOM_SCHEDULER_CHECK(!in_flight_) << "Schedule called again before Update";
  last_now_ = now;
  ExpireDeadlines(now);
  CollectGarbage();

  StepPlan plan;
  plan.seqs.reserve(running_.size() + 8);
  scheduled_.clear();
  scheduled_.reserve(running_.size() + 8);
  int32_t budget = config_.max_num_batched_tokens;
  if (ScheduleRunning(budget, plan)) {
    AdmitWaiting(now, budget, plan);
  }
  in_flight_ = true;
  return plan;
}

bool Scheduler::ScheduleRunning(int32_t& budget, StepPlan& plan) {
  // Decodes still to come in this pass; a prefill chunk leaves room for them.
  int32_t decodes_left = 0;
  for (const Sequence* seq : running_) {
    decodes_left += seq->num_uncomputed_tokens() == 1 ? 1 : 0;
  }

  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    if (i + 2 * kPrefetchDistance < running_.size()) {
      PrefetchSeq(running_[i + 2 * kPrefetchDistance]);
    }
    if (i + kPrefetchDistance < running_.size()) {
      // A decode that fills its last block or needs a new one calls the
      // cache, whose records of the sequence are cold: start loading them.
      const Sequence& ahead = *running_[i + kPrefetchDistance];
      const int32_t end = ahead.num_computed_tokens + 1;
      if (ahead.num_uncomputed_tokens() == 1 &&
          (end % block_size_ == 0 || end > ahead.num_blocks_held() * block_size_)) {
        cache_->Prefetch(ahead.seq_id);
      }
    }
    Sequence& seq = *running_[i];
    const int32_t num_uncomputed = seq.num_uncomputed_tokens();
    LOOM_SCHEDULER_CHECK(num_uncomputed > 0);
    int32_t available = budget;
    if (num_uncomputed == 1) {
      --decodes_left;
    } else {
      available -= decodes_left;
    }
    const int32_t num_new = ChunkSize(num_uncomputed, available);
    if (num_new <= 0) {
      continue;
    }

    // Most decodes fit in the last block held and fill no block: for the
    // cache such a call has nothing to allocate and no full block to hash.
    const int32_t end = seq.num_computed_tokens + num_new;
    if (end <= seq.num_blocks_held() * block_size_ &&
        end / block_size_ == seq.num_computed_tokens / block_size_) {
      AddToPlan(seq, num_new, plan);
      budget -= num_new;
      continue;
    }
    const CacheRequest req = seq.cache_request();
    for (;;) {
      std::optional<std::vector<BlockId>> blocks =
          cache_->AllocateSlots(req, seq.num_computed_tokens, num_new);
      if (blocks.has_value()) {
        seq.block_table.insert(seq.block_table.end(), blocks->begin(), blocks->end());
        UpdateReservation(seq);
        break;
      }
      // running_ is in key order and sequences after i are not planned yet,
      // so the greatest key can go without unplanning anything.
      Sequence* victim = running_.back();
      running_.pop_back();
      preempted = true;
      if (victim != &seq && victim->num_uncomputed_tokens() == 1) {
        --decodes_left;
      }
      Preempt(*victim);
      if (victim == &seq) {
        return false;
      }
    }
    AddToPlan(seq, num_new, plan);
    budget -= num_new;
  }
  return !preempted;
}

void Scheduler::AdmitWaiting(absl::Time now, int32_t& budget, StepPlan& plan) {
  const size_t num_old = running_.size();
  while (!waiting_.empty() && budget > 0) {
    Sequence& seq = **waiting_.begin();
    Request& request = *seq.request;
    // Sample 0 brings the slots of the samples it will fork.
    const int32_t num_pending = seq.index == 0 ? request.num_pending : 0;
    if (num_running_ + num_pending_slots_ + 1 + num_pending > config_.max_num_seqs) {
      break;
    }
    if (config_.admission == AdmissionPolicy::kReserve &&
        cache_->NumFreeBlocks() - num_reserved_blocks_ <
            static_cast<int64_t>(1 + num_pending) * BlocksFor(request.max_seq_len)) {
      break;
    }
    const CacheRequest req = seq.cache_request();
    ComputedBlocks hit = cache_->GetComputedBlocks(req);
    const int32_t num_new = ChunkSize(seq.num_tokens() - hit.num_computed_tokens, budget);
    std::optional<std::vector<BlockId>> blocks = cache_->AllocateSlots(req, 0, num_new, &hit);
    if (!blocks.has_value()) {
      break;
    }

    waiting_.erase(waiting_.begin());
    seq.state = SeqState::kRunning;
    ++num_running_;
    seq.num_computed_tokens = hit.num_computed_tokens;
    seq.block_table = std::move(hit.blocks);
    seq.block_table.insert(seq.block_table.end(), blocks->begin(), blocks->end());
    UpdateReservation(seq);
    HoldPendingSlots(request);
    if (!request.started) {
      request.started = true;
      started_.push_back(StartedRequest{.handle = request.handle,
                                        .num_cached_prompt_tokens = hit.num_computed_tokens,
                                        .scheduled_time = now});
    }
    running_.push_back(&seq);
    AddToPlan(seq, num_new, plan);
    budget -= num_new;
  }
  std::inplace_merge(running_.begin(), running_.begin() + static_cast<std::ptrdiff_t>(num_old),
                     running_.end(), KeyLess());
}

void Scheduler::AddToPlan(Sequence& seq, int32_t num_new_tokens, StepPlan& plan) {
  ScheduledSeq& planned = plan.seqs.emplace_back();
  planned.seq_id = seq.seq_id;
  planned.all_token_ids = seq.token_ids;
  planned.num_prompt_tokens = seq.num_prompt_tokens;
  planned.num_computed_tokens = seq.num_computed_tokens;
  planned.num_scheduled_tokens = num_new_tokens;
  planned.sample = seq.num_computed_tokens + num_new_tokens == seq.num_tokens();
  planned.block_table = seq.block_table;  // final: a sequence allocates once a step
  planned.sampling = planned.sample ? &seq.sampling : nullptr;
  plan.num_scheduled_tokens += num_new_tokens;
  scheduled_.push_back(&seq);
}

UpdateOutput Scheduler::Update(const StepPlan& plan, const StepResult& result) {
  LOOM_SCHEDULER_CHECK(in_flight_) << "Update without a Schedule";
  LOOM_SCHEDULER_CHECK(plan.seqs.size() == scheduled_.size())
      << "not the plan of the last Schedule";
  UpdateOutput output;
  output.started = std::move(started_);
  started_.clear();

  std::vector<Sequence*> forked;
  size_t num_samples = 0;
  for (size_t i = 0; i < scheduled_.size(); ++i) {
    Sequence& seq = *scheduled_[i];
    const ScheduledSeq& planned = plan.seqs[i];
    LOOM_SCHEDULER_CHECK(seq.seq_id == planned.seq_id);
    const bool completes_prompt =
        seq.num_computed_tokens < seq.num_prompt_tokens &&
        seq.num_computed_tokens + planned.num_scheduled_tokens >= seq.num_prompt_tokens;
    seq.num_computed_tokens += planned.num_scheduled_tokens;
    num_samples += planned.sample ? 1 : 0;
    // With thousands of sequences their token lists are out of cache: start
    // fetching the tails that the sampled tokens are appended to below.
    if (planned.sample) {
      __builtin_prefetch(seq.token_ids.data() + seq.token_ids.size(), 1);
    }
    if (i + 8 < scheduled_.size()) {
      __builtin_prefetch(scheduled_[i + 8]);
    }
    if (completes_prompt && seq.index == 0 && seq.request->num_pending > 0) {
      ForkSiblings(*seq.request, forked);
    }
  }
  LOOM_SCHEDULER_CHECK(result.sampled.size() == num_samples) << "one token per sampling sequence";

  output.new_tokens.reserve(num_samples);
  size_t cursor = 0;
  scheduled_index_.clear();
  for (const SampledToken& sampled : result.sampled) {
    // The plan-order cursor tells which sequences come next: their records
    // first, then (once those have arrived) the token tails appended to.
    if (cursor + 2 * kPrefetchDistance < scheduled_.size()) {
      PrefetchSeq(scheduled_[cursor + 2 * kPrefetchDistance]);
    }
    if (cursor + kPrefetchDistance < scheduled_.size()) {
      const std::vector<int32_t>& ahead = scheduled_[cursor + kPrefetchDistance]->token_ids;
      __builtin_prefetch(ahead.data() + ahead.size(), 1);
    }
    Sequence& seq = FindScheduled(plan, sampled.seq_id, cursor);
    seq.token_ids.push_back(sampled.token_id);
    output.new_tokens.push_back(NewToken{.handle = seq.handle(),
                                         .index = seq.index,
                                         .token_id = sampled.token_id,
                                         .logprob = sampled.logprob,
                                         .top = sampled.top});
    std::string stop_reason;
    const FinishReason reason = CheckStop(seq.token_ids, seq.num_prompt_tokens, seq.stop,
                                          config_.eos_token_ids, max_model_len_, &stop_reason);
    if (reason == FinishReason::kNone) {
      continue;
    }
    const Request& request = *seq.request;
    EndSeq(seq);
    output.finished.push_back(FinishedSeq{.handle = seq.key.handle,
                                          .index = seq.index,
                                          .reason = reason,
                                          .stop_reason = std::move(stop_reason),
                                          .request_finished = request.num_unfinished == 0});
  }

  in_flight_ = false;
  scheduled_.clear();
  if (!forked.empty()) {
    std::sort(forked.begin(), forked.end(), KeyLess());
    const auto num_old = static_cast<std::ptrdiff_t>(running_.size());
    running_.insert(running_.end(), forked.begin(), forked.end());
    std::inplace_merge(running_.begin(), running_.begin() + num_old, running_.end(), KeyLess());
  }
  ApplyDeferredEnds(output);
  CollectGarbage();
  return output;
}

Sequence& Scheduler::FindScheduled(const StepPlan& plan, int64_t seq_id, size_t& cursor) {
  // Executors normally return samples in plan order.
  while (cursor < plan.seqs.size() && !plan.seqs[cursor].sample) {
    ++cursor;
  }
  if (cursor < plan.seqs.size() && plan.seqs[cursor].seq_id == seq_id) {
    return *scheduled_[cursor++];
  }
  if (scheduled_index_.empty()) {
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (plan.seqs[i].sample) {
        scheduled_index_.emplace(plan.seqs[i].seq_id, i);
      }
    }
  }
  const auto it = scheduled_index_.find(seq_id);
  LOOM_SCHEDULER_CHECK(it != scheduled_index_.end())
      << "sampled seq " << seq_id << " was not to sample";
  return *scheduled_[it->second];
}

void Scheduler::ForkSiblings(Request& request, std::vector<Sequence*>& forked) {
  ReleasePendingSlots(request);
  // The child recomputes at least the last prompt token to get its own logits,
  // so it shares the full blocks before that token.
  const int32_t num_shared_tokens = request.num_prompt_tokens - 1;
  const int32_t num_shared_blocks = num_shared_tokens / block_size_;
  const Sequence& parent = *request.seqs[0];
  for (const std::unique_ptr<Sequence>& child : request.seqs) {
    if (child->state != SeqState::kPending) {
      continue;
    }
    cache_->Fork(parent.seq_id, child->seq_id, num_shared_tokens);
    child->num_computed_tokens = num_shared_blocks * block_size_;
    child->block_table.assign(parent.block_table.begin(),
                              parent.block_table.begin() + num_shared_blocks);
    child->state = SeqState::kRunning;
    ++num_running_;
    UpdateReservation(*child);
    forked.push_back(child.get());
  }
  request.num_pending = 0;
}

void Scheduler::ExpireDeadlines(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const RequestHandle handle = deadlines_.begin()->second;
    expired_.push_back(handle);
    EndRequest(*requests_.at(handle));  // retiring erases the deadline
  }
}

void Scheduler::FinishSeq(RequestHandle handle, uint32_t index, FinishReason reason) {
  LOOM_SCHEDULER_CHECK(reason != FinishReason::kNone);
  if (in_flight_) {
    deferred_.push_back(DeferredEnd{.handle = handle, .index = index, .reason = reason});
    return;
  }
  if (Sequence* seq = FindSeq(handle, index)) {
    EndSeq(*seq);
  }
}

void Scheduler::AbortRequest(RequestHandle handle) {
  if (in_flight_) {
    deferred_.push_back(
        DeferredEnd{.handle = handle, .index = std::nullopt, .reason = FinishReason::kAborted});
    return;
  }
  const auto it = requests_.find(handle);
  if (it != requests_.end()) {
    EndRequest(*it->second);
  }
}

std::vector<RequestHandle> Scheduler::TakeExpired() { return std::exchange(expired_, {}); }

void Scheduler::ApplyDeferredEnds(UpdateOutput& output) {
  if (deferred_.empty()) {
    return;
  }
  const std::vector<DeferredEnd> ends = std::exchange(deferred_, {});
  for (const DeferredEnd& end : ends) {
    if (end.index.has_value()) {
      FinishSeq(end.handle, *end.index, end.reason);
    } else {
      AbortRequest(end.handle);
    }
  }
  const auto ended = [&ends](RequestHandle handle, std::optional<uint32_t> index) {
    return std::ranges::any_of(ends, [&](const DeferredEnd& end) {
      return end.handle == handle && (!end.index.has_value() || end.index == index);
    });
  };
  std::erase_if(output.new_tokens, [&](const NewToken& t) { return ended(t.handle, t.index); });
  std::erase_if(output.finished, [&](const FinishedSeq& f) { return ended(f.handle, f.index); });
  std::erase_if(output.started,
                [&](const StartedRequest& s) { return ended(s.handle, std::nullopt); });
}

Sequence* Scheduler::FindSeq(RequestHandle handle, uint32_t index) const {
  const auto it = requests_.find(handle);
  if (it == requests_.end() || index >= it->second->seqs.size()) {
    return nullptr;
  }
  return it->second->seqs[index].get();
}

void Scheduler::Preempt(Sequence& seq) {
  LOOM_SCHEDULER_CHECK(seq.state == SeqState::kRunning);
  cache_->Free(seq.seq_id);
  ClearReservation(seq);
  seq.num_computed_tokens = 0;
  if (seq.index == 0) {
    ReleasePendingSlots(*seq.request);
  }
  seq.state = SeqState::kWaiting;
  --num_running_;
  waiting_.insert(&seq);
  ++num_preemptions_;
}

void Scheduler::EndSeq(Sequence& seq) {
  Request& request = *seq.request;
  switch (seq.state) {
    case SeqState::kFinished:
      return;
    case SeqState::kRunning:
      cache_->Free(seq.seq_id);
      ClearReservation(seq);
      --num_running_;
      running_has_ended_ = true;  // it leaves running_ in CollectGarbage
      break;
    case SeqState::kWaiting:
      waiting_.erase(&seq);
      break;
    case SeqState::kPending:
      if (request.pending_slots_held) {
        --num_pending_slots_;
        if (config_.admission == AdmissionPolicy::kReserve) {
          num_reserved_blocks_ -= BlocksFor(request.max_seq_len);
        }
      }
      --request.num_pending;
      break;
  }
  seq.state = SeqState::kFinished;
  if (seq.index == 0 && request.num_pending > 0) {
    // Nobody will compute the prompt for the remaining samples: they queue on
    // their own and compute it themselves.
    ReleasePendingSlots(request);
    for (const std::unique_ptr<Sequence>& sibling : request.seqs) {
      if (sibling->state != SeqState::kPending) {
        continue;
      }
      sibling->state = SeqState::kWaiting;
      waiting_.insert(sibling.get());
    }
    request.num_pending = 0;
  }
  if (--request.num_unfinished == 0) {
    RetireRequest(request);
  }
}

void Scheduler::EndRequest(Request& request) {
  // Last sample first, so that sample 0 never hands the prompt to a sibling.
  for (const std::unique_ptr<Sequence>& seq : std::ranges::reverse_view(request.seqs)) {
    EndSeq(*seq);
  }
}

void Scheduler::RetireRequest(Request& request) {
  deadlines_.erase({request.deadline, request.handle});
  const auto it = requests_.find(request.handle);
  LOOM_SCHEDULER_CHECK(it != requests_.end());
  retired_.push_back(std::move(it->second));
  requests_.erase(it);
}

void Scheduler::HoldPendingSlots(Request& request) {
  if (request.pending_slots_held || request.num_pending == 0) {
    return;
  }
  request.pending_slots_held = true;
  num_pending_slots_ += request.num_pending;
  if (config_.admission == AdmissionPolicy::kReserve) {
    num_reserved_blocks_ +=
        static_cast<int64_t>(request.num_pending) * BlocksFor(request.max_seq_len);
  }
}

void Scheduler::ReleasePendingSlots(Request& request) {
  if (!request.pending_slots_held) {
    return;
  }
  request.pending_slots_held = false;
  num_pending_slots_ -= request.num_pending;
  if (config_.admission == AdmissionPolicy::kReserve) {
    num_reserved_blocks_ -=
        static_cast<int64_t>(request.num_pending) * BlocksFor(request.max_seq_len);
  }
}

void Scheduler::UpdateReservation(Sequence& seq) {
  if (config_.admission != AdmissionPolicy::kReserve) {
    return;
  }
  const int32_t reserved = std::max(0, BlocksFor(seq.request->max_seq_len) - seq.num_blocks_held());
  num_reserved_blocks_ += reserved - seq.num_blocks_reserved;
  seq.num_blocks_reserved = reserved;
}

void Scheduler::ClearReservation(Sequence& seq) {
  num_reserved_blocks_ -= seq.num_blocks_reserved;
  seq.num_blocks_reserved = 0;
  seq.block_table.clear();
}

void Scheduler::CollectGarbage() {
  if (running_has_ended_) {
    std::erase_if(running_, [](const Sequence* seq) { return seq->state != SeqState::kRunning; });
    running_has_ended_ = false;
  }
  retired_.clear();
}

int32_t Scheduler::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

int32_t Scheduler::ChunkSize(int32_t num_uncomputed, int32_t budget) const {
  int32_t n = std::min(num_uncomputed, budget);
  if (config_.long_prefill_token_threshold > 0) {
    n = std::min(n, config_.long_prefill_token_threshold);
  }
  return n;
}

}  // namespace loom
