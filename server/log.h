// Line-oriented logging for loomd through a bounded asynchronous queue: the
// caller formats and enqueues, one writer thread writes to the file
// descriptor. A caller never waits for I/O, so the engine thread may log; when
// the queue is full (the reader of stderr is stuck) the line is dropped and
// counted. Each line starts with a UTC timestamp and lines never interleave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace loom {

class AsyncLogger {
 public:
  // Writes to fd (not owned) and queues at most max_queued_bytes of text.
  AsyncLogger(int fd, size_t max_queued_bytes);
  ~AsyncLogger();  // writes what is queued, then stops the writer

  AsyncLogger(const AsyncLogger&) = delete;
  AsyncLogger& operator=(const AsyncLogger&) = delete;

  // Enqueues message as one timestamped line; drops it when the queue is full.
  void Log(absl::string_view message);

  // Waits until the queue is empty and written, or timeout; true when empty.
  bool Flush(absl::Duration timeout);

  uint64_t dropped() const;
  uint64_t written() const;

 private:
  void Run();

  const int fd_;
  const size_t max_queued_bytes_;
  mutable Mutex mu_;
  CondVar changed_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread writer_;  // last: it uses every member above
};

// Text loomd's process-wide logger (stderr) holds at most.
inline constexpr size_t kLogQueueBytes = size_t{1} << 20;

// The process-wide logger on stderr; created on first use, never destroyed
// (a writer stuck on stderr must not hang the exit).
AsyncLogger& ProcessLogger();

// ProcessLogger().Log(message).
void LogLine(absl::string_view message);

// Lines the process-wide logger dropped (loom_log_messages_dropped_total).
uint64_t LogMessagesDropped();

// Before exit: gives queued lines up to timeout to reach stderr.
void FlushLog(absl::Duration timeout = absl::Seconds(2));

}  // namespace loom
