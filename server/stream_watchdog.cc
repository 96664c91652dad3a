#include "server/stream_watchdog.h"

#include <utility>

#include "absl/time/clock.h"

namespace loom {

StreamWatchdog::StreamWatchdog(absl::Duration interval)
    : interval_(interval), thread_([this] { Run(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  thread_.join();
}

void StreamWatchdog::Watch(Check check) {
  MutexLock lock(mu_);
  checks_.push_back(std::move(check));
}

void StreamWatchdog::Run() {
  mu_.Lock();
  while (true) {
    const absl::Time tick = absl::Now() + interval_;
    while (!stopping_ && stop_cv_.WaitFor(mu_, tick - absl::Now())) {
    }
    if (stopping_) break;
    // The checks run outside the lock: they take the streams' own locks, and
    // new streams register meanwhile.
    std::vector<Check> checks = std::move(checks_);
    checks_.clear();
    mu_.Unlock();
    const absl::Time now = absl::Now();
    std::vector<Check> alive;
    alive.reserve(checks.size());
    for (Check& check : checks) {
      if (check(now)) {
        alive.push_back(std::move(check));
      }
    }
    mu_.Lock();
    for (Check& check : checks_) {
      alive.push_back(std::move(check));
    }
    checks_ = std::move(alive);
  }
  mu_.Unlock();
}

}  // namespace loom
