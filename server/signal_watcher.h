// SIGTERM/SIGINT for the drain of DESIGN.md's lifecycle, with no work in a
// signal handler: the signals are blocked in every thread and one thread
// takes them with sigwait() and notifies whoever waits.
#pragma once

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
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
  bool WaitForSignal(absl::Duration timeout);
  // The signal that arrived; 0 while none has.
  int signal();

 private:
  void Run();

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering.
  std::mutex mu_;
  std::condition_variable received_;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace loom
