#include "server/signal_watcher.h"

#include <pthread.h>

namespace loom {
namespace {

// SIGUSR1 only wakes the watcher thread when it is being stopped.
constexpr int kWakeSignal = SIGUSR1;

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, kWakeSignal);
  return set;
}

}  // namespace

void SignalWatcher::BlockSignals() {
  const sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SignalWatcher::SignalWatcher() : thread_([this] { Run(); }) {}

SignalWatcher::~SignalWatcher() {
  // The thread exits after taking one signal; wake it when none has come.
  if (signal() == 0) {
    pthread_kill(thread_.native_handle(), kWakeSignal);
  }
  thread_.join();
}

void SignalWatcher::Run() {
  const sigset_t set = WatchedSignals();
  int signal = 0;
  if (sigwait(&set, &signal) != 0 || signal == kWakeSignal) {
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    signal_ = signal;
  }
  received_.notify_all();
}

bool SignalWatcher::WaitForSignal(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return received_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                            [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return signal_ != 0; });
}

int SignalWatcher::signal() {
  const std::lock_guard<std::mutex> lock(mu_);
  return signal_;
}

}  // namespace loom
