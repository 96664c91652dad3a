// The scheduler's request lifecycle outside the step loop: admission into
// the waiting queue (validation and the records), deadlines, ends
// requested by the engine or the client (applied at once, or deferred to the
// end of Update while a plan is in flight), preemption, retirement, and the
// batch-slot and block reservations these move. Also CheckInvariants.
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "scheduler/scheduler.h"

namespace loom {
namespace {

// Generated tokens a sequence has room for from the start: appending the
// tokens of a sample shorter than this never reallocates its token list.
constexpr int32_t kMaxGeneratedReserve = 512;

}  // namespace

absl::StatusOr<RequestHandle> Scheduler::AddRequest(RequestParams params) {
  LOOM_RETURN_IF_ERROR(ValidateRequest(params));
  const RequestHandle handle = next_handle_++;
  std::unique_ptr<Request> request = NewRequest(handle, std::move(params));
  waiting_.insert(request->seqs[0].get());
  if (request->deadline != absl::InfiniteFuture()) {
    deadlines_.emplace(request->deadline, handle);
  }
  requests_.emplace(handle, std::move(request));
  return handle;
}

int32_t Scheduler::MaxSeqLen(const RequestParams& params) const {
  return static_cast<int32_t>(std::min<int64_t>(
      static_cast<int64_t>(params.prompt_token_ids.size()) + params.stopping.max_tokens,
      max_model_len_));
}

absl::Status Scheduler::ValidateRequest(const RequestParams& params) const {
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
  // 0 only scores the prompt: the token sampled after it is dropped.
  const int32_t min_max_tokens = params.prompt_logprobs >= 0 ? 0 : 1;
  if (stopping.max_tokens < min_max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens is ", stopping.max_tokens,
                                                   "; it must be at least ", min_max_tokens));
  }
  if (stopping.min_tokens < 0 || stopping.min_tokens > stopping.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens is ", stopping.min_tokens,
                                                   "; the allowed range is 0..max_tokens (",
                                                   stopping.max_tokens, ")"));
  }
  const int32_t max_seq_len = MaxSeqLen(params);
  if (config_.admission == AdmissionPolicy::kReserve &&
      params.n * MaxBlocksFor(max_seq_len) > num_usable_blocks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt + max_tokens of ", params.n, " samples need ", params.n * MaxBlocksFor(max_seq_len),
        " KV blocks; the pool has ", num_usable_blocks_));
  }
  return absl::OkStatus();
}

std::unique_ptr<Request> Scheduler::NewRequest(RequestHandle handle, RequestParams params) {
  const auto num_prompt_tokens = static_cast<int32_t>(params.prompt_token_ids.size());
  auto request = std::make_unique<Request>();
  request->handle = handle;
  request->num_prompt_tokens = num_prompt_tokens;
  request->max_seq_len = MaxSeqLen(params);
  request->stopping = std::move(params.stopping);
  request->cache_salt = std::move(params.cache_salt);
  request->num_prompt_logprobs = params.prompt_logprobs;
  request->constraint = std::move(params.constraint);
  if (request->constraint != nullptr) ++num_constrained_requests_;
  request->deadline = params.deadline;
  request->num_unfinished = params.n;
  request->num_pending = params.n - 1;

  absl::Time rank = absl::UnixEpoch();
  const absl::Time arrival =
      params.arrival_time == absl::InfinitePast() ? last_now_ : params.arrival_time;
  if (config_.policy == SchedulingPolicy::kPriority) {
    rank = arrival + config_.priority_aging * params.priority;
  } else if (config_.policy == SchedulingPolicy::kShortestPrompt) {
    rank = arrival + config_.prompt_token_aging * num_prompt_tokens;
  }
  const StopBounds bounds =
      StopBounds::From(StopRules::From(request->stopping), num_prompt_tokens, max_model_len_);
  const auto capacity =
      static_cast<size_t>(std::min(request->max_seq_len, num_prompt_tokens + kMaxGeneratedReserve));
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
    seq->token_ids.Assign(params.prompt_token_ids, capacity, arena_);
    seq->sampling = params.sampling;
    seq->sampling.seed = DeriveSampleSeed(params.sampling.seed, index);
    if (request->constraint != nullptr) {
      // The samples share the prompt, not the output: each starts fresh.
      seq->matcher =
          i == 0 ? request->constraint->NewMatcher() : request->seqs[0]->matcher->Clone();
      seq->has_constraint = true;
    }
    request->seqs.push_back(std::move(seq));
  }
  return request;
}

void Scheduler::ExpireDeadlines(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const RequestHandle handle = deadlines_.begin()->second;
    expired_.push_back(handle);
    EndRequest(*requests_.at(handle));  // retiring erases the deadline
  }
}

void Scheduler::FinishSeq(RequestHandle handle, uint32_t index, FinishReason reason) {
  LOOM_CHECK(reason != FinishReason::kNone);
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

absl::Time Scheduler::EarliestDeadline() const {
  return deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
}

absl::Time Scheduler::DeadlineOf(RequestHandle handle) const {
  const auto it = requests_.find(handle);
  return it == requests_.end() ? absl::InfiniteFuture() : it->second->deadline;
}

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
  LOOM_CHECK(seq.state == SeqState::kRunning);
  num_running_decodes_ -= IsDecode(seq);
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
      num_running_decodes_ -= IsDecode(seq);
      cache_->Free(seq.seq_id);
      ClearReservation(seq);
      --num_running_;  // it leaves running_ in the next ScheduleRunning
      break;
    case SeqState::kWaiting:
      waiting_.erase(&seq);
      break;
    case SeqState::kPending:
      if (request.pending_slots_held) {
        --num_pending_slots_;
        if (config_.admission == AdmissionPolicy::kReserve) {
          num_reserved_blocks_ -= MaxBlocksFor(request.max_seq_len);
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
    for (const SeqPtr& sibling : request.seqs) {
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
  for (auto seq = request.seqs.rbegin(); seq != request.seqs.rend(); ++seq) {
    EndSeq(**seq);
  }
}

void Scheduler::RetireRequest(Request& request) {
  deadlines_.erase({request.deadline, request.handle});
  if (request.constraint != nullptr) --num_constrained_requests_;
  const auto it = requests_.find(request.handle);
  LOOM_CHECK(it != requests_.end());
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
        static_cast<int64_t>(request.num_pending) * MaxBlocksFor(request.max_seq_len);
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
        static_cast<int64_t>(request.num_pending) * MaxBlocksFor(request.max_seq_len);
  }
}

void Scheduler::UpdateReservation(Sequence& seq) {
  if (config_.admission != AdmissionPolicy::kReserve) {
    return;
  }
  // What it may still take, net of what the window's releases give back.
  const auto reserved = static_cast<int32_t>(std::max<int64_t>(
      0, MaxBlocksFor(seq.request->max_seq_len) - cache_->NumBlocksHeld(seq.seq_id)));
  num_reserved_blocks_ += reserved - seq.num_blocks_reserved;
  seq.num_blocks_reserved = reserved;
}

void Scheduler::ClearReservation(Sequence& seq) {
  num_reserved_blocks_ -= seq.num_blocks_reserved;
  seq.num_blocks_reserved = 0;
  seq.block_table = {};
}

void Scheduler::CheckInvariants() const {
  LOOM_CHECK(!in_flight_) << "CheckInvariants between Schedule and Update";
  for (size_t i = 1; i < running_.size(); ++i) {
    LOOM_CHECK(!KeyLess()(running_[i], running_[i - 1]))
        << "running_ out of key order at " << i << ": " << running_[i - 1]->seq_id << " then "
        << running_[i]->seq_id;
  }
  absl::flat_hash_map<const Sequence*, int32_t> in_running;
  for (const Sequence* seq : running_) {
    ++in_running[seq];
  }
  int32_t num_running = 0;
  int32_t num_decodes = 0;
  size_t num_waiting = 0;
  for (const auto& [handle, request] : requests_) {
    for (const SeqPtr& seq : request->seqs) {
      if (seq->state == SeqState::kRunning) {
        ++num_running;
        num_decodes += IsDecode(*seq);
        const auto it = in_running.find(seq.get());
        LOOM_CHECK(it != in_running.end() && it->second == 1)
            << "running seq " << seq->seq_id << " is not in running_ exactly once";
      } else if (seq->state == SeqState::kWaiting) {
        ++num_waiting;
        LOOM_CHECK(waiting_.contains(seq.get()))
            << "waiting seq " << seq->seq_id << " is not queued";
      }
    }
  }
  LOOM_CHECK(num_running == num_running_)
      << num_running << " running sequences; the counter says " << num_running_;
  LOOM_CHECK(num_decodes == num_running_decodes_)
      << num_decodes << " running decodes; the counter says " << num_running_decodes_;
  LOOM_CHECK(num_waiting == waiting_.size());
}

}  // namespace loom
