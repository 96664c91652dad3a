#include "engine/engine.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/kv_cache_manager.h"
#include "engine/output_processor.h"
#include "scheduler/scheduler.h"

namespace loom {
namespace {

// The scheduler's per-step budgets must fit what the executor was sized for.
absl::Status CheckBudgets(const SchedulerConfig& s, const ExecutorGeometry& g) {
  if (g.max_num_seqs > 0 && s.max_num_seqs > g.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("--max_num_seqs ", s.max_num_seqs,
                                                   " exceeds the executor's limit of ",
                                                   g.max_num_seqs, " sequences per step"));
  }
  if (g.max_num_batched_tokens > 0 && s.max_num_batched_tokens > g.max_num_batched_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_num_batched_tokens ", s.max_num_batched_tokens, " exceeds the executor's limit of ",
        g.max_num_batched_tokens, " tokens per step"));
  }
  return absl::OkStatus();
}
// The client's deadline and the server's copy of it differ by the time the
// call took to arrive and by the rounding of the grpc-timeout header, so a
// cancellation that the client's deadline caused may come slightly early.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(50);

}  // namespace

struct Engine::BlockListing {
  Mutex mu;
  CondVar done_cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<std::vector<BlockHash>> hashes ABSL_GUARDED_BY(mu);

  void Complete(absl::StatusOr<std::vector<BlockHash>> result) {
    MutexLock lock(mu);
    hashes = std::move(result);
    done = true;
    done_cv.NotifyAll();
  }
};

Engine::Engine(EngineConfig config, std::unique_ptr<Executor> executor,
               std::shared_ptr<const Detokenizer> detokenizer, Clock* clock)
    : config_(std::move(config)),
      executor_(std::move(executor)),
      geometry_(executor_->Geometry()),
      clock_(clock),
      processor_(std::make_unique<OutputProcessor>(std::move(detokenizer), nullptr)) {}

Engine::~Engine() { Shutdown(); }

void Engine::SetObserver(EngineObserver* observer) {
  observer_ = observer;
  processor_->set_observer(observer);
}

void Engine::SetKvEventSink(KvEventSink* sink) { kv_event_sink_ = sink; }

absl::StatusOr<std::vector<BlockHash>> Engine::CachedBlockHashes(absl::Duration timeout) {
  auto listing = std::make_shared<BlockListing>();
  {
    MutexLock lock(mu_);
    if (!started_ || stop_requested_ || failed_) {
      return absl::UnavailableError("the engine is not running");
    }
    Command command;
    command.kind = Command::Kind::kListBlocks;
    command.listing = listing;
    inbox_.push_back(std::move(command));
    work_cv_.NotifyOne();
  }
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(listing->mu);
  while (!listing->done) {
    if (!listing->done_cv.WaitFor(listing->mu, deadline - absl::Now()) && !listing->done) {
      return absl::DeadlineExceededError("the engine thread did not list its blocks in time");
    }
  }
  return std::move(listing->hashes);
}

void Engine::FlushKvEvents() {
  if (kv_event_sink_ == nullptr) return;
  std::vector<KvEvent> events = cache_->TakeEvents();
  if (!events.empty()) kv_event_sink_->Publish(std::move(events));
}

absl::Status Engine::Start() {
  {
    MutexLock lock(mu_);
    if (started_ || stop_requested_) return absl::FailedPreconditionError("engine already started");
  }
  if (geometry_.num_blocks < geometry_.kv_layout.stride() + 1 || geometry_.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the executor reports ", geometry_.num_blocks, " KV blocks of ", geometry_.block_size,
        " tokens; at least 2 blocks (one is the null block) of at least 1 token are needed"));
  }
  SchedulerConfig scheduler_config = config_.scheduler;
  if (absl::Status status = CheckBudgets(scheduler_config, geometry_); !status.ok()) {
    return status;
  }
  if (scheduler_config.max_model_len == 0) scheduler_config.max_model_len = geometry_.max_model_len;
  if (scheduler_config.max_model_len <= 0) {
    return absl::InvalidArgumentError("max_model_len is unknown: the executor reports none");
  }
  cache_ = std::make_unique<KvCacheManager>(
      KvCacheConfig{.num_blocks = geometry_.num_blocks,
                    .block_size = geometry_.block_size,
                    .enable_prefix_caching = config_.enable_prefix_caching,
                    .layout = geometry_.kv_layout});
  if (kv_event_sink_ != nullptr) cache_->EnableEvents();
  scheduler_ = std::make_unique<Scheduler>(scheduler_config, cache_.get());
  if (config_.warmup) {
    if (absl::Status status = Warmup(); !status.ok()) {
      counters_.healthy = false;
      PublishStats();
      return status;
    }
  }
  PublishStats();
  {
    MutexLock lock(mu_);
    max_model_len_ = scheduler_->max_model_len();
    started_ = true;
    accepting_ = true;
  }
  MarkProgress(/*parked=*/false);
  MutexLock shutdown_lock(shutdown_mu_);
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

absl::Status Engine::Warmup() {
  // One prefill of a block's worth of token 0 into blocks 1, 2, ... (one per
  // table entry of a logical block), which no request holds yet and whose
  // contents nothing reads before they are written again.
  const int32_t num_tokens = std::min(geometry_.block_size, scheduler_->max_model_len());
  const std::vector<int32_t> token_ids(num_tokens, 0);
  std::vector<int32_t> block_table(static_cast<size_t>(geometry_.kv_layout.stride()));
  std::iota(block_table.begin(), block_table.end(), 1);
  SamplingParams sampling;
  sampling.temperature = 0;
  StepPlan plan;
  plan.seqs.push_back({.seq_id = 0,
                       .all_token_ids = token_ids,
                       .num_prompt_tokens = num_tokens,
                       .num_computed_tokens = 0,
                       .num_scheduled_tokens = num_tokens,
                       .sample = true,
                       .block_table = block_table,
                       .sampling = &sampling});
  plan.num_scheduled_tokens = num_tokens;
  absl::StatusOr<StepResult> result = executor_->Execute(plan);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("warm-up step failed: ", result.status().message()));
  }
  if (result->sampled.size() != 1) {
    return absl::InternalError(
        absl::StrCat("warm-up step sampled ", result->sampled.size(), " tokens for one sequence"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestHandle> Engine::Submit(RequestParams params,
                                             std::shared_ptr<OutputSink> sink) {
  MutexLock lock(mu_);
  if (failed_) return absl::InternalError(absl::StrCat("engine failed: ", failure_.message()));
  if (!accepting_) {
    return absl::UnavailableError(stop_requested_ ? "engine is shut down"
                                  : started_      ? "engine is draining"
                                                  : "engine is not started");
  }
  if (params.prompt_logprobs >= 0 && !geometry_.prompt_logprobs) {
    return absl::UnimplementedError(
        absl::StrCat("prompt_logprobs is not supported on the ", geometry_.device, " executor"));
  }
  if (params.constraint != nullptr && geometry_.vocab_size > 0 &&
      params.constraint->vocab_size() != geometry_.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the constraint's token masks cover ", params.constraint->vocab_size(),
                     " tokens; the model's vocabulary has ", geometry_.vocab_size));
  }
  const int32_t num_queued = num_waiting_ + inbox_submits_;
  const int32_t limit = config_.scheduler.max_queued_requests;
  if (num_queued >= limit) {
    rejected_tenants_.push_back(params.tenant);
    work_cv_.NotifyOne();
    return absl::ResourceExhaustedError(absl::StrCat("waiting queue is full: ", num_queued,
                                                     " queued, max_queued_requests is ", limit));
  }
  if (params.arrival_time == absl::InfinitePast()) params.arrival_time = clock_->Now();
  const RequestId id{next_id_++};
  inbox_.push_back({.kind = Command::Kind::kSubmit,
                    .id = id,
                    .params = std::move(params),
                    .sink = std::move(sink),
                    .listing = nullptr});
  ++inbox_submits_;
  ++num_in_flight_;
  work_cv_.NotifyOne();
  return id.value;
}

void Engine::Abort(RequestHandle handle) {
  MutexLock lock(mu_);
  if (!started_ || stop_requested_ || failed_) return;
  Command command;
  command.kind = Command::Kind::kAbort;
  command.id = RequestId{handle};
  inbox_.push_back(std::move(command));
  work_cv_.NotifyOne();
}

void Engine::StopAccepting() {
  MutexLock lock(mu_);
  accepting_ = false;
}

bool Engine::WaitUntilIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(mu_);
  while (num_in_flight_ != 0) {
    if (!idle_cv_.WaitFor(mu_, deadline - absl::Now())) return num_in_flight_ == 0;
  }
  return true;
}

void Engine::Shutdown(absl::Status status) {
  MutexLock shutdown_lock(shutdown_mu_);
  {
    MutexLock lock(mu_);
    accepting_ = false;
    if (!stop_requested_) {
      stop_requested_ = true;
      stop_status_ = std::move(status);
    }
    work_cv_.NotifyAll();
  }
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::Stats() const {
  MutexLock lock(stats_mu_);
  return stats_;
}

bool Engine::healthy() const {
  MutexLock lock(stats_mu_);
  return stats_.healthy;
}

EngineHeartbeat Engine::Heartbeat() const {
  EngineHeartbeat heartbeat;
  heartbeat.num_steps = heartbeat_steps_.load(std::memory_order_acquire);
  heartbeat.last_progress = absl::FromUnixNanos(last_progress_ns_.load(std::memory_order_acquire));
  heartbeat.parked = parked_.load(std::memory_order_acquire);
  MutexLock lock(mu_);
  heartbeat.num_in_flight = num_in_flight_;
  return heartbeat;
}

bool Engine::Stalled(absl::Duration timeout) const {
  const EngineHeartbeat heartbeat = Heartbeat();
  if (heartbeat.parked || heartbeat.num_in_flight == 0) return false;
  const absl::Time now = clock_->Now();
  // Progress inside a step counts from when a caller here first sees it.
  const uint64_t progress = executor_->progress();
  if (executor_progress_seen_.exchange(progress, std::memory_order_acq_rel) != progress) {
    executor_progress_ns_.store(absl::ToUnixNanos(now), std::memory_order_release);
  }
  const absl::Time in_step =
      absl::FromUnixNanos(executor_progress_ns_.load(std::memory_order_acquire));
  return now - std::max(heartbeat.last_progress, in_step) > timeout;
}

void Engine::MarkProgress(bool parked) {
  last_progress_ns_.store(absl::ToUnixNanos(clock_->Now()), std::memory_order_release);
  parked_.store(parked, std::memory_order_release);
}

int32_t Engine::max_model_len() const {
  MutexLock lock(mu_);
  return max_model_len_;
}

void Engine::Loop() {
  bool stalled = false;
  std::vector<Command> commands;
  while (true) {
    commands.clear();
    std::vector<std::string> rejected;  // the tenant of each, often empty
    if (!WaitForWork(stalled, commands, rejected)) break;
    if (observer_ != nullptr) {
      for (const std::string& tenant : rejected) {
        observer_->OnRequestFinished(FinishLabel::kRejected, Usage{}, tenant);
      }
    }
    for (Command& command : commands) HandleCommand(command);
    if (scheduler_->HasUnfinished()) {
      if (!Step(stalled)) return;
    } else {
      stalled = false;
    }
    PublishStats();
  }
  absl::Status status;
  {
    MutexLock lock(mu_);
    status = stop_status_;
  }
  FailAll(status);
  PublishStats();
  MarkProgress(/*parked=*/true);
}

bool Engine::WaitForWork(bool stalled, std::vector<Command>& commands,
                         std::vector<std::string>& rejected) {
  MutexLock lock(mu_);
  if (!scheduler_->HasUnfinished() || stalled) {
    // A parked thread is waiting, not hung: Stalled() ignores it.
    MarkProgress(/*parked=*/true);
    // Nothing can be planned until a command arrives or (when stalled) a
    // deadline passes.
    const absl::Time deadline = scheduler_->EarliestDeadline();
    if (deadline == absl::InfiniteFuture()) {
      while (!WorkReady()) work_cv_.Wait(mu_);
    } else {
      // The wait is timed on the real clock, for the (injected) clock's time left.
      const absl::Duration left = std::max(deadline - clock_->Now(), absl::ZeroDuration());
      const absl::Time wake = absl::Now() + left;
      while (!WorkReady() && work_cv_.WaitFor(mu_, wake - absl::Now())) {
      }
    }
    MarkProgress(/*parked=*/false);
  }
  if (stop_requested_) return false;
  commands.swap(inbox_);
  // Taken submissions still count against max_queued_requests until the
  // next snapshot reads the scheduler's queue.
  num_waiting_ += inbox_submits_;
  inbox_submits_ = 0;
  rejected.swap(rejected_tenants_);
  return true;
}

bool Engine::WorkReady() const {
  return stop_requested_ || !inbox_.empty() || !rejected_tenants_.empty();
}

void Engine::HandleCommand(Command& command) {
  if (command.kind == Command::Kind::kListBlocks) {
    FlushKvEvents();
    command.listing->Complete(cache_->CachedBlockHashes());
    return;
  }
  if (command.kind == Command::Kind::kAbort) {
    const std::optional<RequestHandle> handle = processor_->FindHandle(command.id);
    if (!handle) return;
    const absl::Time deadline = scheduler_->DeadlineOf(*handle);
    scheduler_->AbortRequest(*handle);
    const absl::Time now = clock_->Now();
    // gRPC cancels a call whose deadline passed, and that cancellation can
    // reach the engine before the engine's own expiry does: an abort at (or
    // just before, see kDeadlineSlack) the deadline is the deadline's.
    const bool expired = now + kDeadlineSlack >= deadline;
    processor_->Fail(*handle,
                     expired ? absl::DeadlineExceededError("request deadline passed")
                             : absl::CancelledError("request cancelled"),
                     now);
    ++num_finished_unpublished_;
    return;
  }
  absl::StatusOr<RequestHandle> handle = scheduler_->AddRequest(command.params);
  if (!handle.ok()) {
    RequestOutput output;
    output.finished = true;
    output.status = handle.status();
    output.usage.prompt_tokens = static_cast<uint32_t>(command.params.prompt_token_ids.size());
    if (observer_ != nullptr) {
      observer_->OnRequestFinished(FinishLabelFor(output.status), output.usage,
                                   command.params.tenant);
    }
    command.sink->Push(output);
    ++num_finished_unpublished_;
    return;
  }
  processor_->Add(command.id, *handle, command.params, std::move(command.sink));
}

bool Engine::Step(bool& stalled) {
  const absl::Time start = clock_->Now();
  StepPlan plan = scheduler_->Schedule(start);
  for (RequestHandle handle : scheduler_->TakeExpired()) {
    if (processor_->Fail(handle, absl::DeadlineExceededError("request deadline passed"), start)) {
      ++num_finished_unpublished_;
    }
  }
  {
    MutexLock lock(mu_);
    num_waiting_ = scheduler_->num_waiting();
  }
  stalled = plan.seqs.empty();
  if (stalled) {
    (void)scheduler_->Update(StepResult{});
    FlushKvEvents();
    return true;
  }
  absl::StatusOr<StepResult> result = executor_->Execute(plan);
  if (!result.ok()) {
    {
      MutexLock lock(mu_);
      failed_ = true;
      accepting_ = false;
      failure_ = result.status();
    }
    counters_.healthy = false;
    FailAll(absl::InternalError(absl::StrCat("engine failure: ", result.status().message())));
    CloseFailedStep(plan);
    FlushKvEvents();
    PublishStats();
    return false;
  }
  const UpdateOutput update = scheduler_->Update(*result);
  const absl::Time end = clock_->Now();
  const OutputProcessor::StepOutcome outcome = processor_->ProcessStep(update, end);
  for (const SampleRef& sample : outcome.stop_string_ends) {
    scheduler_->FinishSeq(sample.handle, sample.index, FinishReason::kStop);
  }
  ++counters_.num_steps;
  heartbeat_steps_.store(counters_.num_steps, std::memory_order_release);
  MarkProgress(/*parked=*/false);
  counters_.prompt_tokens_total += outcome.num_started_prompt_tokens;
  counters_.generation_tokens_total += update.new_tokens.size();
  counters_.last_step_seconds = absl::ToDoubleSeconds(end - start);
  scheduler_->ObserveStep(plan.num_scheduled_tokens, counters_.last_step_seconds);
  if (observer_ != nullptr) {
    observer_->OnStep(counters_.last_step_seconds, static_cast<int32_t>(plan.seqs.size()),
                      plan.num_scheduled_tokens);
  }
  num_finished_unpublished_ += outcome.num_finished;
  FlushKvEvents();
  return true;
}

void Engine::CloseFailedStep(const StepPlan& plan) {
  // The scheduler applies aborts of a planned step when the step is updated;
  // placeholder tokens complete it so that every block returns to the pool.
  // Nothing reads the update: every request has already been failed.
  StepResult placeholder;
  for (const ScheduledSeq& seq : plan.seqs) {
    if (seq.sample) placeholder.sampled.emplace_back().seq_id = seq.seq_id;
  }
  (void)scheduler_->Update(placeholder);
}

void Engine::FailAll(const absl::Status& status) {
  const absl::Time now = clock_->Now();
  for (RequestHandle handle : processor_->handles()) {
    scheduler_->AbortRequest(handle);
    if (processor_->Fail(handle, status, now)) ++num_finished_unpublished_;
  }
  std::vector<Command> commands;
  {
    MutexLock lock(mu_);
    commands.swap(inbox_);
    inbox_submits_ = 0;
  }
  for (Command& command : commands) {
    if (command.kind == Command::Kind::kListBlocks) {
      command.listing->Complete(absl::UnavailableError("the engine stopped"));
      continue;
    }
    if (command.kind != Command::Kind::kSubmit) continue;
    RequestOutput output;
    output.finished = true;
    output.status = status;
    if (observer_ != nullptr) {
      observer_->OnRequestFinished(FinishLabelFor(status), Usage{}, command.params.tenant);
    }
    command.sink->Push(std::move(output));
    ++num_finished_unpublished_;
  }
}

void Engine::PublishStats() {
  EngineStats stats = counters_;
  stats.num_running = scheduler_->num_running();
  const KvCacheStats kv = cache_->Stats();
  stats.kv_cache_usage = cache_->Usage();
  stats.num_blocks_free = kv.num_free - kv.num_cached_free;
  stats.num_blocks_used = kv.num_used;
  stats.num_blocks_cached = kv.num_cached_free;
  stats.kv_groups_by_kind = geometry_.kv_layout.has_sliding_window();
  stats.num_blocks_used_full = kv.num_used_full;
  stats.num_blocks_used_sliding = kv.num_used_sliding;
  stats.prefix_query_tokens = static_cast<uint64_t>(kv.prefix_query_tokens);
  stats.prefix_hit_tokens = static_cast<uint64_t>(kv.prefix_hit_tokens);
  stats.num_preemptions = static_cast<uint64_t>(scheduler_->num_preemptions());
  // Requests are counted finished only once the snapshot that shows their
  // blocks freed is out, so WaitUntilIdle() is followed by accurate Stats().
  MutexLock lock(mu_);
  num_waiting_ = scheduler_->num_waiting();
  stats.num_waiting = num_waiting_ + inbox_submits_;
  {
    MutexLock stats_lock(stats_mu_);
    stats_ = stats;
  }
  num_in_flight_ -= std::exchange(num_finished_unpublished_, 0);
  if (num_in_flight_ == 0) idle_cv_.NotifyAll();
}

}  // namespace loom
