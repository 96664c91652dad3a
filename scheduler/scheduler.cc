#include "scheduler/scheduler.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <ranges>
#include <utility>

#include "base/check.h"

namespace loom {
namespace {

// How many sequences ahead the per-step loops prefetch: with thousands of
// running sequences their records are out of cache, and one miss per sequence
// would dominate the step.
constexpr size_t kPrefetchDistance = 8;

// The longest sequence whose blocks the pool holds, at most max_model_len.
int32_t CapModelLen(int32_t max_model_len, int32_t num_blocks, const KvCacheManager& cache,
                    int32_t max_chunk_tokens) {
  int32_t lo = 0, hi = max_model_len;  // lo fits
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (cache.groups().MaxBlocksHeld(mid, max_chunk_tokens) <= num_blocks) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* cache)
    : config_(config),
      cache_(cache),
      block_size_(cache->block_size()),
      block_mask_(std::has_single_bit(static_cast<uint32_t>(block_size_)) ? block_size_ - 1 : -1),
      stride_(cache->groups().stride()),
      num_usable_blocks_(cache->Stats().num_blocks),
      max_model_len_(CapModelLen(config.max_model_len, num_usable_blocks_, *cache,
                                 config.max_num_batched_tokens)) {
  LOOM_CHECK(config_.max_model_len > 0) << "max_model_len is required";
  LOOM_CHECK(config_.max_num_seqs > 0);
  // Every running decode must fit in one step next to the oldest prefill
  // chunk, or that prefill could be passed over.
  LOOM_CHECK(config_.max_num_batched_tokens >= config_.max_num_seqs);
  LOOM_CHECK(config_.long_prefill_token_threshold >= 0);
  LOOM_CHECK(config_.max_num_partial_prefills >= 0);
  LOOM_CHECK(config_.priority_aging > absl::ZeroDuration());
  LOOM_CHECK(config_.prompt_token_aging > absl::ZeroDuration());
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
  int32_t num_prefills = 0;
  prefill_left_ = PrefillAllowance();
  const bool preempted = !ScheduleRunning(budget, num_prefills, plan);
  // ScheduleRunning dropped the ended sequences from running_, the last
  // pointers into retired requests.
  retired_.clear();
  if (!preempted) {
    AdmitWaiting(now, budget, num_prefills, plan);
  }
  FillTokenMasks(plan);
  in_flight_ = true;
  return plan;
}

void Scheduler::FillTokenMasks(StepPlan& plan) const {
  if (num_constrained_requests_ == 0) {
    return;
  }
  TokenMasks& masks = plan.token_masks;
  int32_t num_rows = 0;
  for (size_t i = 0; i < scheduled_.size(); ++i) {
    const Sequence& seq = *scheduled_[i].seq;
    if (!scheduled_[i].sample || !seq.has_constraint) {
      continue;
    }
    if (masks.row_of_seq.empty()) {
      masks.row_of_seq.assign(plan.seqs.size(), -1);
      masks.words_per_row = TokenBitmaskWords(seq.request->constraint->vocab_size());
    }
    masks.row_of_seq[i] = num_rows++;
  }
  masks.bits.assign(static_cast<size_t>(num_rows) * masks.words_per_row, 0u);
  for (size_t i = 0; i < masks.row_of_seq.size(); ++i) {
    const int32_t row = masks.row_of_seq[i];
    if (row < 0) {
      continue;
    }
    // A mask that allows nothing (the vocabulary cannot spell what must come
    // next) leaves the row empty; ApplySampled ends the sample on whatever
    // the executor draws for it.
    const std::span<uint32_t> bits(
        masks.bits.data() + static_cast<size_t>(row) * masks.words_per_row, masks.words_per_row);
    (void)scheduled_[i].seq->matcher->FillNextTokenBitmask(bits);
  }
}

bool Scheduler::ScheduleRunning(int32_t& budget, int32_t& num_prefills, StepPlan& plan) {
  RunningPass pass{.decodes_left = num_running_decodes_,
                   .num_free_blocks = cache_->NumFreeBlocks()};
  // One pass over running_ plans the step and drops the sequences that ended
  // since the last one: running_[0, kept) holds the running ones visited.
  size_t kept = 0;
  size_t i = 0;
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
    const int32_t num_new = RunningChunk(seq, budget, pass.decodes_left);
    if (num_new <= 0) {
      continue;
    }
    const bool partial = num_new < num_uncomputed;
    if (partial && !HasPrefillSlot(num_prefills)) {
      continue;  // a partial prefill waits for a slot; its blocks stay
    }
    // Most decodes fit in the last block held and fill no block: for the
    // cache such a call has nothing to allocate and no full block to hash.
    if (!StaysInBlock(seq, num_new) && !AddToBatch(seq, num_new, pass, plan) &&
        !AllocateOrPreempt(seq, num_new, pass)) {
      --kept;  // it preempted itself
      break;
    }
    AddToPlan(seq, num_new, plan);
    Spend(num_uncomputed, num_new, budget);
    num_prefills += partial ? 1 : 0;
  }
  AllocateBatch(plan);
  // The sequences the budget did not reach keep their places.
  for (; i < running_.size(); ++i) {
    if (running_[i]->state == SeqState::kRunning) {
      running_[kept++] = running_[i];
    }
  }
  running_.resize(kept);
  return !pass.preempted;
}

int32_t Scheduler::RunningChunk(const Sequence& seq, int32_t budget, int32_t& decodes_left) const {
  const int32_t num_uncomputed = seq.num_uncomputed_tokens();
  LOOM_CHECK(num_uncomputed > 0);
  int32_t available = budget;
  if (num_uncomputed == 1) {
    --decodes_left;
  } else {
    available -= decodes_left;
  }
  return ChunkSize(num_uncomputed, available);
}

bool Scheduler::AddToBatch(Sequence& seq, int32_t num_new_tokens, RunningPass& pass,
                           StepPlan& plan) {
  if (!pass.batching) {
    return false;
  }
  // Pool blocks; the sliding pages the call releases only add to what is free.
  const int64_t num_needed = std::max(
      0, BlocksFor(seq.num_computed_tokens + num_new_tokens) * stride_ - seq.num_table_entries());
  if (pass.num_batch_blocks + num_needed > pass.num_free_blocks) {
    AllocateBatch(plan);
    pass.batching = false;
    return false;
  }
  pass.num_batch_blocks += num_needed;
  batch_.push_back(SlotRequest{.req = seq.cache_request(),
                               .num_computed_tokens = seq.num_computed_tokens,
                               .num_new_tokens = num_new_tokens});
  // Its plan entry comes next; AllocateBatch sets its block table.
  batch_seqs_.emplace_back(&seq, plan.seqs.size());
  return true;
}

bool Scheduler::AllocateOrPreempt(Sequence& seq, int32_t num_new_tokens, RunningPass& pass) {
  const CacheRequest req = seq.cache_request();
  for (;;) {
    if (const std::optional<SlotAllocation> allocation =
            cache_->AllocateSlots(req, seq.num_computed_tokens, num_new_tokens)) {
      seq.block_table = allocation->block_table;
      UpdateReservation(seq);
      return true;
    }
    // running_ is in key order and sequences after seq are not planned yet,
    // so the greatest key can go without unplanning anything. Ended
    // sequences at the back are dropped on the way.
    Sequence* victim = running_.back();
    running_.pop_back();
    if (victim->state != SeqState::kRunning) {
      continue;
    }
    pass.preempted = true;
    if (victim != &seq && victim->num_uncomputed_tokens() == 1) {
      --pass.decodes_left;
    }
    Preempt(*victim);
    if (victim == &seq) {
      return false;
    }
  }
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

void Scheduler::AdmitWaiting(absl::Time now, int32_t& budget, int32_t& num_prefills,
                             StepPlan& plan) {
  const size_t num_old = running_.size();
  while (!waiting_.empty() && budget > 0) {
    PrefetchWaitingAhead();
    Sequence& seq = **waiting_.begin();
    if (!HasRoomToAdmit(seq)) {
      break;
    }
    const CacheRequest req = seq.cache_request();
    // Prompt logprobs need the logits of every prompt position: such a
    // request computes its whole prompt (it still fills the cache for others).
    ComputedBlocks hit;
    if (seq.request->num_prompt_logprobs < 0) hit = cache_->GetComputedBlocks(req);
    const int32_t num_uncomputed = seq.num_tokens() - hit.num_computed_tokens;
    const int32_t num_new = ChunkSize(num_uncomputed, budget);
    const bool partial = num_new < num_uncomputed;
    if (num_new <= 0 || (partial && !HasPrefillSlot(num_prefills))) {
      break;
    }
    const std::optional<SlotAllocation> allocation = cache_->AllocateSlots(req, 0, num_new, &hit);
    if (!allocation.has_value()) {
      break;
    }
    waiting_.erase(waiting_.begin());
    StartRunning(seq, hit.num_computed_tokens, allocation->block_table, now);
    AddToPlan(seq, num_new, plan);
    Spend(num_uncomputed, num_new, budget);
    num_prefills += partial ? 1 : 0;
  }
  std::inplace_merge(running_.begin(), running_.begin() + static_cast<std::ptrdiff_t>(num_old),
                     running_.end(), KeyLess());
}

void Scheduler::PrefetchWaitingAhead() const {
  // The prompts of waiting sequences have long left the cache: while the head
  // is admitted, load the prompt of the next one and the record of the one
  // after that.
  auto next = std::next(waiting_.begin());
  if (next == waiting_.end()) {
    return;
  }
  const Sequence& ahead = **next;
  const auto num_lines = std::min<size_t>(ahead.token_ids.size() * sizeof(int32_t) / 64, 16);
  for (size_t line = 0; line <= num_lines; ++line) {
    __builtin_prefetch(reinterpret_cast<const char*>(ahead.token_ids.data()) + 64 * line);
  }
  if (++next != waiting_.end()) {
    __builtin_prefetch(*next);
  }
}

bool Scheduler::HasRoomToAdmit(const Sequence& seq) const {
  const Request& request = *seq.request;
  // Sample 0 brings the slots of the samples it will fork.
  const int32_t num_pending = seq.index == 0 ? request.num_pending : 0;
  if (num_running_ + num_pending_slots_ + 1 + num_pending > config_.max_num_seqs) {
    return false;
  }
  return config_.admission != AdmissionPolicy::kReserve ||
         cache_->NumFreeBlocks() - num_reserved_blocks_ >=
             static_cast<int64_t>(1 + num_pending) * MaxBlocksFor(request.max_seq_len);
}

void Scheduler::StartRunning(Sequence& seq, int32_t num_cached_tokens,
                             std::span<const BlockId> block_table, absl::Time now) {
  Request& request = *seq.request;
  seq.state = SeqState::kRunning;
  ++num_running_;
  seq.num_computed_tokens = num_cached_tokens;
  seq.block_table = block_table;
  num_running_decodes_ += IsDecode(seq);
  UpdateReservation(seq);
  HoldPendingSlots(request);
  if (!request.started) {
    request.started = true;
    started_.push_back(StartedRequest{.handle = request.handle,
                                      .num_cached_prompt_tokens = num_cached_tokens,
                                      .scheduled_time = now});
  }
  running_.push_back(&seq);
}

int8_t Scheduler::PromptLogprobsFor(const Sequence& seq) {
  // Sample 0 computes the prompt; the other samples share it.
  const int32_t wanted = seq.request->num_prompt_logprobs;
  if (wanted < 0 || seq.index != 0 || seq.num_computed_tokens + 1 >= seq.num_prompt_tokens) {
    return -1;
  }
  return static_cast<int8_t>(std::min(wanted, kMaxTopLogprobs));
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
                                   .num_prompt_logprobs = PromptLogprobsFor(seq),
                                   .block_table = seq.block_table,
                                   .sampling = sample ? &seq.sampling : nullptr});
  plan.num_scheduled_tokens += num_new_tokens;
  scheduled_.push_back(InFlightSeq{.seq = &seq,
                                   .tail = seq.token_ids.data() + seq.token_ids.size(),
                                   .num_new_tokens = num_new_tokens,
                                   .sample = sample});
  num_scheduled_samples_ += sample ? 1 : 0;
}

UpdateOutput Scheduler::Update(const StepResult& result) {
  LOOM_CHECK(in_flight_) << "Update without a Schedule";
  LOOM_CHECK(result.sampled.size() == num_scheduled_samples_) << "one token per sampling sequence";
  UpdateOutput output;
  output.started = std::move(started_);
  started_.clear();
  output.new_tokens.reserve(num_scheduled_samples_);
  for (const PromptLogprobsChunk& chunk : result.prompt_logprobs) {
    output.prompt_logprobs.push_back(PromptLogprobsUpdate{
        .handle = static_cast<RequestHandle>(chunk.seq_id / kMaxSamplesPerRequest),
        .first_position = chunk.first_position,
        .entries = chunk.entries});
  }

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
    AdvanceComputed(seq, planned.num_new_tokens, forked);
    if (!planned.sample || !in_plan_order) {
      continue;
    }
    in_plan_order = result.sampled[next_sampled].seq_id == seq.seq_id;
    if (in_plan_order) {
      ApplySampled(seq, result.sampled[next_sampled++], output);
    }
  }
  if (!in_plan_order) {
    ApplyOutOfOrder(std::span(result.sampled).subspan(next_sampled), output);
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

void Scheduler::AdvanceComputed(Sequence& seq, int32_t num_new_tokens,
                                std::vector<Sequence*>& forked) {
  const bool completes_prompt = seq.num_computed_tokens < seq.num_prompt_tokens &&
                                seq.num_computed_tokens + num_new_tokens >= seq.num_prompt_tokens;
  num_running_decodes_ -= IsDecode(seq);
  seq.num_computed_tokens += num_new_tokens;
  num_running_decodes_ += IsDecode(seq);
  if (completes_prompt && seq.index == 0 && seq.request->num_pending > 0) {
    ForkSiblings(*seq.request, forked);
  }
}

void Scheduler::ApplyOutOfOrder(std::span<const SampledToken> sampled, UpdateOutput& output) {
  scheduled_index_.clear();
  for (size_t i = 0; i < scheduled_.size(); ++i) {
    if (scheduled_[i].sample) {
      scheduled_index_.emplace(scheduled_[i].seq->seq_id, i);
    }
  }
  for (const SampledToken& token : sampled) {
    const auto it = scheduled_index_.find(token.seq_id);
    LOOM_CHECK(it != scheduled_index_.end())
        << "sampled seq " << token.seq_id << " was not to sample";
    Sequence& seq = *scheduled_[it->second].seq;
    LOOM_CHECK(seq.num_uncomputed_tokens() == 0) << "seq " << token.seq_id << " sampled twice";
    ApplySampled(seq, token, output);
  }
}

void Scheduler::ApplySampled(Sequence& seq, const SampledToken& sampled, UpdateOutput& output) {
  // Only a mask that allowed nothing (the vocabulary cannot spell what must
  // come next) lets the executor draw a token the constraint rejects: the
  // sample cannot go on, and the token is dropped.
  if (seq.has_constraint && !seq.matcher->AcceptToken(sampled.token_id)) {
    Stop(seq, FinishReason::kStop, "", /*completes_constraint=*/false, output);
    return;
  }
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
  if (seq.has_constraint && seq.matcher->IsTerminated()) {
    // Nothing can follow: the sample ends here, and the token belongs to the
    // output unless it is an EOS.
    const bool eos =
        std::ranges::find(config_.eos_token_ids, sampled.token_id) != config_.eos_token_ids.end();
    Stop(seq, FinishReason::kStop, "", /*completes_constraint=*/!eos, output);
    return;
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
  Stop(seq, reason, std::move(stop_reason), /*completes_constraint=*/false, output);
}

void Scheduler::Stop(Sequence& seq, FinishReason reason, std::string stop_reason,
                     bool completes_constraint, UpdateOutput& output) {
  const Request& request = *seq.request;
  EndSeq(seq);
  output.finished.push_back(FinishedSeq{.handle = seq.key.handle,
                                        .index = seq.index,
                                        .reason = reason,
                                        .stop_reason = std::move(stop_reason),
                                        .request_finished = request.num_unfinished == 0,
                                        .completes_constraint = completes_constraint});
}

void Scheduler::ForkSiblings(Request& request, std::vector<Sequence*>& forked) {
  ReleasePendingSlots(request);
  // The child recomputes at least the last prompt token to get its own logits,
  // so it shares the full blocks before that token (or none, when the parent
  // has released sliding pages the child still reads).
  const int32_t num_shared_tokens = request.num_prompt_tokens - 1;
  const Sequence& parent = *request.seqs[0];
  for (const SeqPtr& child : request.seqs) {
    if (child->state != SeqState::kPending) {
      continue;
    }
    const ForkedBlocks shared = cache_->Fork(parent.seq_id, child->seq_id, num_shared_tokens);
    child->block_table = shared.block_table;
    child->num_computed_tokens = shared.num_computed_tokens;
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

bool Scheduler::StaysInBlock(const Sequence& seq, int32_t num_new_tokens) const {
  const int32_t computed = seq.num_computed_tokens;
  const int32_t offset = block_mask_ >= 0 ? (computed & block_mask_) : computed % block_size_;
  // Multiplied rather than divided by stride_: computed < logical blocks * block_size_.
  return static_cast<int64_t>(computed) * stride_ <
             static_cast<int64_t>(seq.num_table_entries()) * block_size_ &&
         offset + num_new_tokens < block_size_;
}

int32_t Scheduler::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

bool Scheduler::HasPrefillSlot(int32_t num_prefills) const {
  return config_.max_num_partial_prefills == 0 || num_prefills < config_.max_num_partial_prefills;
}

int64_t Scheduler::MaxBlocksFor(int32_t max_seq_len) const {
  return cache_->groups().MaxBlocksHeld(max_seq_len, config_.max_num_batched_tokens);
}

int32_t Scheduler::ChunkSize(int32_t num_uncomputed, int32_t budget) const {
  int32_t n = std::min(num_uncomputed, budget);
  if (config_.long_prefill_token_threshold > 0) {
    n = std::min(n, config_.long_prefill_token_threshold);
  }
  if (num_uncomputed > 1) n = std::min(n, prefill_left_);
  return n;
}

int32_t Scheduler::PrefillAllowance() const {
  if (config_.max_step_ms <= 0.0 || num_running_decodes_ == 0 || !step_cost_.Known()) {
    return std::numeric_limits<int32_t>::max();
  }
  return std::max(kMinPrefillTokensPerStep,
                  step_cost_.TokensWithin(config_.max_step_ms / 1e3) - num_running_decodes_);
}

void Scheduler::Spend(int32_t num_uncomputed, int32_t num_new, int32_t& budget) {
  budget -= num_new;
  if (num_uncomputed > 1) prefill_left_ -= num_new;
}

}  // namespace loom
