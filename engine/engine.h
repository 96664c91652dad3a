// The engine: one thread that owns the scheduler, the KV cache manager and the
// executor, fed through an inbox (Submit, Abort) and answering through each
// request's OutputSink. Every step reads as
//
//   drain inbox -> Schedule(now) -> Execute(plan) -> Update -> detokenize,
//   stop strings -> push deltas to sinks -> publish stats
//
// and the thread blocks (no spinning) while there is nothing to do.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "engine/clock.h"
#include "engine/engine_observer.h"
#include "engine/engine_stats.h"
#include "engine/kv_event_sink.h"
#include "engine/request_id.h"
#include "engine/request_output.h"
#include "model/executor.h"
#include "types/detokenizer.h"
#include "types/kv_event.h"
#include "types/request_params.h"
#include "types/scheduler_config.h"
#include "types/step.h"

namespace loom {

// The engine's own parts, kept out of this header so that its users (the
// server) see neither the scheduler nor the cache.
class KvCacheManager;
class OutputProcessor;
class Scheduler;

struct EngineConfig {
  // max_model_len 0 takes the executor's. max_queued_requests bounds the
  // sequences waiting in the scheduler plus the requests not yet taken from
  // the inbox.
  SchedulerConfig scheduler;
  // The pool's num_blocks and block_size come from the executor, which has
  // already allocated the KV memory.
  bool enable_prefix_caching = true;
  // Runs one small step through the executor in Start(), so that the first
  // request does not pay for lazy initialization and a broken backend shows
  // before the server reports SERVING.
  bool warmup = true;
};

// The engine thread's liveness, read from any thread. Progress is a finished
// step or the thread parking in its wait for work.
struct EngineHeartbeat {
  uint64_t num_steps = 0;
  absl::Time last_progress = absl::InfinitePast();
  bool parked = true;         // blocked in its wait for work (or not running)
  int64_t num_in_flight = 0;  // requests submitted and not yet given a final output
};

class Engine {
 public:
  // clock must outlive the engine.
  Engine(EngineConfig config, std::unique_ptr<Executor> executor,
         std::shared_ptr<const Detokenizer> detokenizer, Clock* clock = Clock::Real());
  ~Engine();  // Shutdown()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Per-event metrics; call before Start(). The observer must outlive the engine.
  void SetObserver(EngineObserver* observer);

  // Turns on KV-cache events, which then go to sink after each step that
  // changed the prefix index; call before Start(). The sink must outlive the
  // engine.
  void SetKvEventSink(KvEventSink* sink);

  // Builds the cache and scheduler, runs the warm-up step and starts the
  // engine thread. INVALID_ARGUMENT for an unusable configuration, the
  // executor's error when the warm-up step fails.
  absl::Status Start();

  // Thread-safe. Queues a request; its outputs go to sink, ending with one
  // output whose `finished` is set. On error the sink is never called:
  // UNAVAILABLE before Start() and after StopAccepting()/Shutdown(),
  // RESOURCE_EXHAUSTED when the waiting queue is full, INTERNAL after an
  // engine failure, INVALID_ARGUMENT for a constraint compiled for another
  // vocabulary size. An unset arrival_time is set to now.
  absl::StatusOr<RequestHandle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink);

  // Thread-safe. Ends the request: its sink gets a final output with status
  // CANCELLED and its KV blocks are freed. Finished or unknown handles are
  // ignored.
  void Abort(RequestHandle handle);

  // Thread-safe. New submissions get UNAVAILABLE; requests in flight go on.
  void StopAccepting();

  // Thread-safe. Waits until no request is in flight; false on timeout. A
  // request stops being in flight once the snapshot taken after its final
  // output is published, so Stats() then shows its blocks freed.
  bool WaitUntilIdle(absl::Duration timeout);

  // Thread-safe and idempotent. Stops accepting, ends every request in flight
  // with `status` and joins the engine thread.
  void Shutdown(absl::Status status = absl::UnavailableError("engine is shutting down"));

  // Thread-safe. The hash of every block in the prefix index, read on the
  // engine thread between steps, once the events of every earlier step have
  // gone to the KV event sink: what a consumer of those events should hold.
  // UNAVAILABLE when the engine is not running, DEADLINE_EXCEEDED when the
  // engine thread does not answer within timeout.
  absl::StatusOr<std::vector<BlockHash>> CachedBlockHashes(absl::Duration timeout);

  // Thread-safe. The snapshot published after the last step.
  [[nodiscard]] EngineStats Stats() const;
  [[nodiscard]] bool healthy() const;
  [[nodiscard]] EngineHeartbeat Heartbeat() const;
  // Thread-safe. True when work is pending, the engine thread is busy and it
  // has made no progress for longer than timeout: a hung executor step. A step
  // whose executor reports progress inside it (a layer done) is not hung.
  [[nodiscard]] bool Stalled(absl::Duration timeout) const;
  [[nodiscard]] const ExecutorGeometry& geometry() const { return geometry_; }
  // The scheduler's max_model_len (after capping to the pool); valid after Start().
  [[nodiscard]] int32_t max_model_len() const;

 private:
  // A CachedBlockHashes() call waiting for the engine thread's answer.
  struct BlockListing;

  struct Command {
    enum class Kind { kSubmit, kAbort, kListBlocks };
    Kind kind = Kind::kSubmit;
    RequestId id;
    RequestParams params;
    std::shared_ptr<OutputSink> sink;
    std::shared_ptr<BlockListing> listing;  // kListBlocks
  };

  absl::Status Warmup();
  void Loop();
  // Waits for commands, or only for new ones while the scheduler has work it
  // cannot plan (then also until the earliest deadline). False on stop.
  bool WaitForWork(bool stalled, std::vector<Command>& commands,
                   std::vector<std::string>& rejected);
  bool WorkReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleCommand(Command& command);
  // One schedule/execute/update round. False when the executor failed.
  bool Step(bool& stalled);
  // Completes the step whose execution failed, with every request aborted.
  void CloseFailedStep(const StepPlan& plan);
  // Ends every request in flight and every queued submission with status.
  void FailAll(const absl::Status& status);
  void PublishStats();
  // Hands the cache's recorded events to the KV event sink, if there is one.
  void FlushKvEvents();
  void MarkProgress(bool parked);

  const EngineConfig config_;
  const std::unique_ptr<Executor> executor_;
  const ExecutorGeometry geometry_;
  Clock* const clock_;
  EngineObserver* observer_ = nullptr;
  KvEventSink* kv_event_sink_ = nullptr;

  // Engine thread only (after Start()), so read and written without a lock;
  // Start() touches them before the thread exists and Shutdown() after the join.
  std::unique_ptr<KvCacheManager> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  const std::unique_ptr<OutputProcessor> processor_;
  EngineStats counters_;                  // cumulative counters, copied into each snapshot
  int32_t num_finished_unpublished_ = 0;  // final outputs pushed since the last snapshot

  // Started by Start() before any Shutdown() can run; joined under shutdown_mu_.
  std::thread thread_ ABSL_GUARDED_BY(shutdown_mu_);
  Mutex shutdown_mu_;  // serializes Shutdown()'s join

  mutable Mutex mu_;
  CondVar work_cv_;  // inbox, rejection or stop: wakes the engine thread
  CondVar idle_cv_;  // num_in_flight_ reached 0
  std::vector<Command> inbox_ ABSL_GUARDED_BY(mu_);
  int32_t inbox_submits_ ABSL_GUARDED_BY(mu_) = 0;
  // Sequences waiting in the scheduler, plus submissions taken from the inbox
  // but not yet added: with inbox_submits_ what max_queued_requests bounds.
  int32_t num_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  // Submitted and not yet given a final output.
  int64_t num_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Rejections not yet reported to the observer.
  // The tenant of each request refused since the loop last looked.
  std::vector<std::string> rejected_tenants_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;  // the next RequestId
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int32_t max_model_len_ ABSL_GUARDED_BY(mu_) = 0;

  mutable Mutex stats_mu_;
  EngineStats stats_ ABSL_GUARDED_BY(stats_mu_);

  // Written by the engine thread only and read by Heartbeat() without a lock:
  // atomics.
  std::atomic<uint64_t> heartbeat_steps_{0};
  std::atomic<int64_t> last_progress_ns_{0};  // absl::ToUnixNanos of the clock's time
  std::atomic<bool> parked_{true};
  // Stalled()'s view of Executor::progress(): the last value seen, and when it changed.
  mutable std::atomic<uint64_t> executor_progress_seen_{0};
  mutable std::atomic<int64_t> executor_progress_ns_{0};
};

}  // namespace loom
