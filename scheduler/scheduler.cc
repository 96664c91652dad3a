#include "scheduler/scheduler.h"

#include <algorithm>
#include <bit>
#include <ranges>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace loom {
namespace {

// How many sequences ahead the per-step loops prefetch: with thousands of
// running sequences their records are out of cache, and one miss per sequence
// would dominate the step.
constexpr size_t kPrefetchDistance = 8;

// Generated tokens a sequence has room for from the start: appending the
// tokens of a sample shorter than this never reallocates its token list.
constexpr int32_t kMaxGeneratedReserve = 512;

int32_t CapModelLen(int32_t max_model_len, int32_t num_blocks, int32_t block_size) {
  return static_cast<int32_t>(
      std::min<int64_t>(max_model_len, static_cast<int64_t>(num_blocks) * block_size));
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* cache)
    : config_(config),
      cache_(cache),
      block_size_(cache->block_size()),
      block_mask_(std::has_single_bit(static_cast<uint32_t>(block_size_)) ? block_size_ - 1 : -1),
      num_usable_blocks_(cache->Stats().num_blocks),
      max_model_len_(CapModelLen(config.max_model_len, num_usable_blocks_, block_size_)) {
  LOOM_CHECK(config_.max_model_len > 0) << "max_model_len is required";
  LOOM_CHECK(config_.max_num_seqs > 0);
  // Every running decode must fit in one step next to the oldest prefill
  // chunk, or that prefill could be passed over.
  LOOM_CHECK(config_.max_num_batched_tokens >= config_.max_num_seqs);
  LOOM_CHECK(config_.long_prefill_token_threshold >= 0);
  LOOM_CHECK(config_.priority_aging > absl::ZeroDuration());
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
  const StopBounds bounds =
      StopBounds::From(StopRules::From(request->stopping), num_prompt_tokens, max_model_len_);
  for (int32_t i = 0; i < params.n; ++i) {
    SeqPtr seq = NewSequence(arena_);
    const auto index = static_cast<uint32_t>(i);
    seq->seq_id = static_cast<int64_t>(handle) * kMaxSamplesPerRequest + i;
    seq->num_prompt_tokens = num_prompt_tokens;
    seq->index = static_cast<uint8_t>(index);
    seq->ignore_eos = bounds.ignore_eos;
    seq->min_stop_len = bounds.min_stop_len;
    seq->max_len = bounds.max_len;
    seq->stop_token_ids = request->stopping.stop_token_ids;
    seq->has_stop_token_ids = !seq->stop_token_ids.empty();

    seq->cache_salt = request->cache_salt;
    seq->request = request.get();
    seq->key = SeqKey{.rank = rank, .handle = handle, .index = index};
    seq->state = i == 0 ? SeqState::kWaiting : SeqState::kPending;
    seq->token_ids.Assign(
        params.prompt_token_ids,
        static_cast<size_t>(std::min(max_seq_len, num_prompt_tokens + kMaxGeneratedReserve)),
        arena_);
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
  LOOM_CHECK(!in_flight_) << "Schedule called again before Update";
  last_now_ = now;
  ExpireDeadlines(now);

  StepPlan plan;
  plan.seqs.reserve(running_.size() + 8);
  scheduled_.clear();
  scheduled_.reserve(running_.size() + 8);
  num_scheduled_samples_ = 0;
  int32_t budget = config_.max_num_batched_tokens;
  const bool preempted = !ScheduleRunning(budget, plan);
  // ScheduleRunning dropped the ended sequences from running_, the last
  // pointers into retired requests.
  retired_.clear();
  if (!preempted) {
    AdmitWaiting(now, budget, plan);
  }
  in_flight_ = true;
  return plan;
}

bool Scheduler::ScheduleRunning(int32_t& budget, StepPlan& plan) {
  // Decodes still to come in this pass; a prefill chunk leaves room for them.
  int32_t decodes_left = num_running_decodes_;
  // Cache calls are collected into one batch while the blocks they need
  // together fit in the free blocks, so none can fail; the first call that
  // might fail flushes the batch and is made on its own, with preemption.
  // The calls reach the cache in the same order either way.
  const int64_t num_free_blocks = cache_->NumFreeBlocks();
  int64_t num_batch_blocks = 0;
  bool batching = true;
  // One pass over running_ plans the step and drops the sequences that ended
  // since the last one: running_[0, kept) holds the running ones visited.
  size_t kept = 0;
  size_t i = 0;
  bool preempted = false;
  for (; i < running_.size() && budget > 0; ++i) {
    if (i + kPrefetchDistance < running_.size()) {
      __builtin_prefetch(running_[i + kPrefetchDistance]);  // its first line is all planning reads
    }
    Sequence& seq = *running_[i];
    if (seq.state != SeqState::kRunning) {
      continue;
    }
    running_[kept++] = &seq;
    const int32_t num_uncomputed = seq.num_uncomputed_tokens();
    LOOM_CHECK(num_uncomputed > 0);
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
    if (StaysInBlock(seq, num_new)) {
      AddToPlan(seq, num_new, plan);
      budget -= num_new;
      continue;
    }
    if (batching) {
      const int64_t num_needed =
          std::max(0, BlocksFor(seq.num_computed_tokens + num_new) - seq.num_blocks_held());
      if (num_batch_blocks + num_needed <= num_free_blocks) {
        num_batch_blocks += num_needed;
        batch_.push_back(SlotRequest{.req = seq.cache_request(),
                                     .num_computed_tokens = seq.num_computed_tokens,
                                     .num_new_tokens = num_new});
        batch_seqs_.emplace_back(&seq, plan.seqs.size());
        AddToPlan(seq, num_new, plan);  // its block table is set by AllocateBatch
        budget -= num_new;
        continue;
      }
      AllocateBatch(plan);
      batching = false;
    }
    const CacheRequest req = seq.cache_request();
    bool preempted_self = false;
    for (;;) {
      std::optional<std::span<const BlockId>> blocks =
          cache_->AllocateSlots(req, seq.num_computed_tokens, num_new);
      if (blocks.has_value()) {
        RefreshBlocks(seq);
        UpdateReservation(seq);
        break;
      }
      // running_ is in key order and sequences after i are not planned yet,
      // so the greatest key can go without unplanning anything. Ended
      // sequences at the back are dropped on the way.
      Sequence* victim = running_.back();
      running_.pop_back();
      if (victim->state != SeqState::kRunning) {
        continue;
      }
      preempted = true;
      if (victim != &seq && victim->num_uncomputed_tokens() == 1) {
        --decodes_left;
      }
      Preempt(*victim);
      if (victim == &seq) {
        --kept;
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) {
      break;
    }
    AddToPlan(seq, num_new, plan);
    budget -= num_new;
  }
  AllocateBatch(plan);
  // The sequences the budget did not reach keep their places.
  for (; i < running_.size(); ++i) {
    if (running_[i]->state == SeqState::kRunning) {
      running_[kept++] = running_[i];
    }
  }
  running_.resize(kept);
  return !preempted;
}

void Scheduler::AllocateBatch(StepPlan& plan) {
  if (batch_.empty()) {
    return;
  }
  batch_tables_.resize(batch_.size());
  cache_->AllocateSlotsBatch(batch_, batch_tables_);
  for (size_t i = 0; i < batch_.size(); ++i) {
    const auto [seq, plan_index] = batch_seqs_[i];
    seq->block_table = batch_tables_[i];
    UpdateReservation(*seq);
    plan.seqs[plan_index].block_table = batch_tables_[i];
  }
  batch_.clear();
  batch_seqs_.clear();
}

void Scheduler::AdmitWaiting(absl::Time now, int32_t& budget, StepPlan& plan) {
  const size_t num_old = running_.size();
  while (!waiting_.empty() && budget > 0) {
    // The prompts of waiting sequences have long left the cache: while this
    // one is admitted, load the prompt of the next one and the record of the
    // one after that.
    if (auto next = std::next(waiting_.begin()); next != waiting_.end()) {
      const Sequence& ahead = **next;
      const auto num_lines = std::min<size_t>(ahead.token_ids.size() * sizeof(int32_t) / 64, 16);
      for (size_t line = 0; line <= num_lines; ++line) {
        __builtin_prefetch(reinterpret_cast<const char*>(ahead.token_ids.data()) + 64 * line);
      }
      if (++next != waiting_.end()) {
        __builtin_prefetch(*next);
      }
    }
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
    std::optional<std::span<const BlockId>> blocks = cache_->AllocateSlots(req, 0, num_new, &hit);
    if (!blocks.has_value()) {
      break;
    }

    waiting_.erase(waiting_.begin());
    seq.state = SeqState::kRunning;
    ++num_running_;
    seq.num_computed_tokens = hit.num_computed_tokens;
    RefreshBlocks(seq);
    num_running_decodes_ += IsDecode(seq);
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
  const bool sample = seq.num_computed_tokens + num_new_tokens == seq.num_tokens();
  // The block table is final unless the cache call is batched: AllocateBatch
  // sets it then.
  plan.seqs.push_back(ScheduledSeq{.seq_id = seq.seq_id,
                                   .all_token_ids = seq.token_ids,
                                   .num_prompt_tokens = seq.num_prompt_tokens,
                                   .num_computed_tokens = seq.num_computed_tokens,
                                   .num_scheduled_tokens = num_new_tokens,
                                   .sample = sample,
                                   .block_table = seq.block_table,
                                   .sampling = sample ? &seq.sampling : nullptr});
  plan.num_scheduled_tokens += num_new_tokens;
  scheduled_.push_back(InFlightSeq{.seq = &seq,
                                   .tail = seq.token_ids.data() + seq.token_ids.size(),
                                   .num_new_tokens = num_new_tokens,
                                   .sample = sample});
  num_scheduled_samples_ += sample ? 1 : 0;
}

UpdateOutput Scheduler::Update(const StepPlan& plan, const StepResult& result) {
  LOOM_CHECK(in_flight_) << "Update without a Schedule";
  // Update works from the scheduler's compact copy of the plan, so the plan
  // is only checked at its ends.
  LOOM_CHECK(plan.seqs.size() == scheduled_.size() &&
             (scheduled_.empty() || (plan.seqs.front().seq_id == scheduled_.front().seq->seq_id &&
                                     plan.seqs.back().seq_id == scheduled_.back().seq->seq_id)))
      << "not the plan of the last Schedule";
  LOOM_CHECK(result.sampled.size() == num_scheduled_samples_) << "one token per sampling sequence";
  UpdateOutput output;
  output.started = std::move(started_);
  started_.clear();
  output.new_tokens.reserve(num_scheduled_samples_);

  // Executors normally return the sampled tokens in plan order: then this
  // single pass over the scheduled sequences applies everything, each record
  // visited once. From the first token out of order on, the rest are matched
  // by seq id afterwards.
  bool in_plan_order = true;
  std::vector<Sequence*> forked;
  size_t next_sampled = 0;
  for (size_t i = 0; i < scheduled_.size(); ++i) {
    // With thousands of sequences their records and token lists are out of
    // cache: load the records ahead (the first line holds what a decode
    // reads) and the tails that sampled tokens are appended to.
    if (i + kPrefetchDistance < scheduled_.size()) {
      const InFlightSeq& ahead = scheduled_[i + kPrefetchDistance];
      __builtin_prefetch(ahead.seq);
      __builtin_prefetch(ahead.tail, 1);
    }
    const InFlightSeq& planned = scheduled_[i];
    Sequence& seq = *planned.seq;
    const bool completes_prompt =
        seq.num_computed_tokens < seq.num_prompt_tokens &&
        seq.num_computed_tokens + planned.num_new_tokens >= seq.num_prompt_tokens;
    num_running_decodes_ -= IsDecode(seq);
    seq.num_computed_tokens += planned.num_new_tokens;
    num_running_decodes_ += IsDecode(seq);
    if (completes_prompt && seq.index == 0 && seq.request->num_pending > 0) {
      ForkSiblings(*seq.request, forked);
    }
    if (!planned.sample || !in_plan_order) {
      continue;
    }
    in_plan_order = result.sampled[next_sampled].seq_id == seq.seq_id;
    if (in_plan_order) {
      ApplySampled(seq, result.sampled[next_sampled++], output);
    }
  }
  if (!in_plan_order) {
    scheduled_index_.clear();
    for (size_t i = 0; i < scheduled_.size(); ++i) {
      if (scheduled_[i].sample) {
        scheduled_index_.emplace(scheduled_[i].seq->seq_id, i);
      }
    }
    for (size_t i = next_sampled; i < result.sampled.size(); ++i) {
      const SampledToken& sampled = result.sampled[i];
      const auto it = scheduled_index_.find(sampled.seq_id);
      LOOM_CHECK(it != scheduled_index_.end())
          << "sampled seq " << sampled.seq_id << " was not to sample";
      Sequence& seq = *scheduled_[it->second].seq;
      LOOM_CHECK(seq.num_uncomputed_tokens() == 0) << "seq " << sampled.seq_id << " sampled twice";
      ApplySampled(seq, sampled, output);
    }
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
  return output;
}

void Scheduler::ApplySampled(Sequence& seq, const SampledToken& sampled, UpdateOutput& output) {
  // A sampling sequence has computed all its tokens: the new one makes it a
  // decode.
  seq.token_ids.PushBack(sampled.token_id, arena_);
  ++num_running_decodes_;
  NewToken& token = output.new_tokens.emplace_back();
  token.handle = seq.handle();
  token.index = seq.index;
  token.token_id = sampled.token_id;
  token.logprob = sampled.logprob;
  if (!sampled.top.empty()) {
    token.top = sampled.top;
  }
  // Most tokens end nothing, which the record's first line shows.
  if (CannotStop(seq.num_tokens(), sampled.token_id, seq.stop_bounds(), seq.has_stop_token_ids,
                 config_.eos_token_ids)) {
    return;
  }
  std::string stop_reason;
  const FinishReason reason = CheckSeqStop(seq, &stop_reason);
  if (reason == FinishReason::kNone) {
    return;
  }
  const Request& request = *seq.request;
  EndSeq(seq);
  output.finished.push_back(FinishedSeq{.handle = seq.key.handle,
                                        .index = seq.index,
                                        .reason = reason,
                                        .stop_reason = std::move(stop_reason),
                                        .request_finished = request.num_unfinished == 0});
}

void Scheduler::ForkSiblings(Request& request, std::vector<Sequence*>& forked) {
  ReleasePendingSlots(request);
  // The child recomputes at least the last prompt token to get its own logits,
  // so it shares the full blocks before that token.
  const int32_t num_shared_tokens = request.num_prompt_tokens - 1;
  const int32_t num_shared_blocks = num_shared_tokens / block_size_;
  const Sequence& parent = *request.seqs[0];
  for (const SeqPtr& child : request.seqs) {
    if (child->state != SeqState::kPending) {
      continue;
    }
    cache_->Fork(parent.seq_id, child->seq_id, num_shared_tokens);
    child->num_computed_tokens = num_shared_blocks * block_size_;
    RefreshBlocks(*child);
    child->state = SeqState::kRunning;
    ++num_running_;
    num_running_decodes_ += IsDecode(*child);
    UpdateReservation(*child);
    forked.push_back(child.get());
  }
  request.num_pending = 0;
}

FinishReason Scheduler::CheckSeqStop(const Sequence& seq, std::string* stop_reason) const {
  // The stop token ids are read only when there are some: they sit outside
  // the record's first cache line.
  return CheckStop(seq.token_ids, seq.stop_bounds(),
                   seq.has_stop_token_ids ? seq.stop_token_ids : std::span<const int32_t>(),
                   config_.eos_token_ids, stop_reason);
}

void Scheduler::RefreshBlocks(Sequence& seq) const {
  seq.block_table = cache_->BlockTable(seq.seq_id);
}

bool Scheduler::StaysInBlock(const Sequence& seq, int32_t num_new_tokens) const {
  const int32_t computed = seq.num_computed_tokens;
  const int32_t offset = block_mask_ >= 0 ? (computed & block_mask_) : computed % block_size_;
  return computed < seq.num_blocks_held() * block_size_ && offset + num_new_tokens < block_size_;
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
