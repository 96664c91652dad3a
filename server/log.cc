#include "server/log.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace loom {
namespace {

// Writes all of text to fd unless it is closed or broken.
void WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

AsyncLogger::AsyncLogger(int fd, size_t max_queued_bytes)
    : fd_(fd), max_queued_bytes_(max_queued_bytes), writer_([this] { Run(); }) {}

AsyncLogger::~AsyncLogger() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.NotifyAll();
  writer_.join();
}

void AsyncLogger::Log(absl::string_view message) {
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone()), message, "\n");
  {
    MutexLock lock(mu_);
    if (queued_bytes_ + line.size() > max_queued_bytes_) {
      ++dropped_;
      return;
    }
    queued_bytes_ += line.size();
    queue_.push_back(std::move(line));
  }
  changed_.NotifyAll();
}

void AsyncLogger::Run() {
  MutexLock lock(mu_);
  while (true) {
    while (!stopping_ && queue_.empty()) changed_.Wait(mu_);
    if (queue_.empty()) {
      return;  // stopping, and everything is written
    }
    // Everything queued so far goes out in one write, outside the lock.
    std::string batch;
    const size_t lines = queue_.size();
    for (const std::string& line : queue_) {
      batch += line;
    }
    queue_.clear();
    writing_ = true;
    mu_.Unlock();
    WriteAll(fd_, batch);
    mu_.Lock();
    writing_ = false;
    queued_bytes_ -= batch.size();
    written_ += lines;
    changed_.NotifyAll();
  }
}

bool AsyncLogger::Flush(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(mu_);
  while (!queue_.empty() || writing_) {
    if (!changed_.WaitFor(mu_, deadline - absl::Now())) return queue_.empty() && !writing_;
  }
  return true;
}

uint64_t AsyncLogger::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

uint64_t AsyncLogger::written() const {
  MutexLock lock(mu_);
  return written_;
}

AsyncLogger& ProcessLogger() {
  static AsyncLogger* const logger = new AsyncLogger(STDERR_FILENO, kLogQueueBytes);
  return *logger;
}

void LogLine(absl::string_view message) { ProcessLogger().Log(message); }

uint64_t LogMessagesDropped() { return ProcessLogger().dropped(); }

void FlushLog(absl::Duration timeout) { ProcessLogger().Flush(timeout); }

}  // namespace loom
