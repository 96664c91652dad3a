// SIGTERM/SIGINT for the drain of DESIGN.md's lifecycle, with no work in a
// signal handler: the signals are blocked in every thread and one thread
// takes them with sigwait() and notifies whoever waits.
#pragma once

#include <csignal>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace loom {

class SignalWatcher {
 public:
  // Blocks SIGTERM and SIGINT (and SIGUSR1, which stops the watcher) in the
  // calling thread, and so in every thread it creates later: call first
  // thing in main, before any thread exists.
  static void BlockSignals();

  SignalWatcher();   // starts the sigwait thread
  ~SignalWatcher();  // stops and joins it

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // True once SIGTERM or SIGINT has arrived; waits at most timeout for it.
  bool WaitForSignal(absl::Duration timeout) {
    return received_.WaitForNotificationWithTimeout(timeout);
  }
  // The signal that arrived; valid after WaitForSignal returned true.
  int signal() const { return signal_; }

 private:
  void Run();

  absl::Notification received_;
  int signal_ = 0;  // written before received_ is notified
  std::thread thread_;
};

}  // namespace loom
