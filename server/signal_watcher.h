// SIGTERM/SIGINT for the drain of DESIGN.md's lifecycle, with no work in a
// signal handler: the signals are blocked in every thread and one thread
// takes them with sigwait() and notifies whoever waits. SIGHUP is counted
// (the main loop reloads --api_keys_file on it); SIGUSR1 and SIGUSR2 are taken
// too and ignored, so that none of them can end the process without a drain
// or stop the watcher.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace loom {

class SignalWatcher {
 public:
  // Blocks the watched signals in the calling thread, and so in every thread
  // it creates later, and ignores SIGPIPE: call first thing in main, before
  // any thread exists.
  static void BlockSignals();

  SignalWatcher();   // starts the sigwait thread
  ~SignalWatcher();  // stops and joins it

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // True once SIGTERM or SIGINT has arrived; waits at most timeout for it.
  bool WaitForSignal(absl::Duration timeout);
  // The first SIGTERM or SIGINT that arrived; 0 while none has.
  int signal();
  // Runs callback once on the watcher thread when SIGTERM or SIGINT arrives,
  // or at once on the caller's thread when one already has. It must outlive
  // the watcher's thread, so it should own what it uses.
  void OnSignal(std::function<void()> callback);
  // SIGHUPs received so far.
  [[nodiscard]] int64_t hangups() const { return hangups_.load(); }

 private:
  void Run();

  Mutex mu_;
  CondVar received_;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_signal_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> hangups_{0};
  std::atomic<bool> stopping_{false};  // atomic: read by the watcher thread without mu_
  std::thread thread_;
};

}  // namespace loom
