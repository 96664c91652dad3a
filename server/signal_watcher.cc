#include "server/signal_watcher.h"

#include <pthread.h>

#include <utility>

#include "absl/time/clock.h"

namespace loom {
namespace {

// Also what the destructor sends to wake the watcher thread; it ends the
// thread only then.
constexpr int kWakeSignal = SIGUSR1;

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, signal);
  return set;
}

bool IsTermination(int signal) { return signal == SIGTERM || signal == SIGINT; }

}  // namespace

void SignalWatcher::BlockSignals() {
  const sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A write to a closed socket or pipe then fails with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
}

SignalWatcher::SignalWatcher() : thread_([this] { Run(); }) {}

SignalWatcher::~SignalWatcher() {
  stopping_.store(true);
  pthread_kill(thread_.native_handle(), kWakeSignal);
  thread_.join();
}

void SignalWatcher::Run() {
  const sigset_t set = WatchedSignals();
  while (true) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if (stopping_.load()) return;
    if (signal == SIGHUP) {
      hangups_.fetch_add(1);
      continue;
    }
    if (!IsTermination(signal)) continue;
    std::function<void()> callback;
    {
      MutexLock lock(mu_);
      if (signal_ != 0) continue;  // a second SIGTERM changes nothing
      signal_ = signal;
      callback = std::move(on_signal_);
      on_signal_ = nullptr;
    }
    received_.NotifyAll();
    if (callback) callback();
  }
}

void SignalWatcher::OnSignal(std::function<void()> callback) {
  {
    MutexLock lock(mu_);
    if (signal_ == 0) {
      on_signal_ = std::move(callback);
      return;
    }
  }
  callback();
}

bool SignalWatcher::WaitForSignal(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(mu_);
  while (signal_ == 0) {
    if (!received_.WaitFor(mu_, deadline - absl::Now())) return signal_ != 0;
  }
  return true;
}

int SignalWatcher::signal() {
  MutexLock lock(mu_);
  return signal_;
}

}  // namespace loom
