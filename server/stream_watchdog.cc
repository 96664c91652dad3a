#include "server/stream_watchdog.h"

#include <utility>

#include "absl/time/clock.h"

namespace loom {

StreamWatchdog::StreamWatchdog(absl::Duration interval)
    : interval_(interval), thread_([this] { Run(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void StreamWatchdog::Watch(Check check) {
  const std::lock_guard<std::mutex> lock(mu_);
  checks_.push_back(std::move(check));
}

void StreamWatchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_),
                            [this] { return stopping_; })) {
    // The checks run outside the lock: they take the streams' own locks, and
    // new streams register meanwhile.
    std::vector<Check> checks = std::move(checks_);
    checks_.clear();
    lock.unlock();
    const absl::Time now = absl::Now();
    std::vector<Check> alive;
    alive.reserve(checks.size());
    for (Check& check : checks) {
      if (check(now)) {
        alive.push_back(std::move(check));
      }
    }
    lock.lock();
    for (Check& check : checks_) {
      alive.push_back(std::move(check));
    }
    checks_ = std::move(alive);
  }
}

}  // namespace loom
