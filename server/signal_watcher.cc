#include "server/signal_watcher.h"

#include <pthread.h>

namespace loom {
namespace {

sigset_t DrainSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void SignalWatcher::BlockSignals() {
  const sigset_t set = DrainSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SignalWatcher::SignalWatcher() : thread_([this] { Run(); }) {}

SignalWatcher::~SignalWatcher() {
  // Wake the thread with a signal it waits for when none has come yet; it
  // exits after taking one signal either way.
  if (!received_.HasBeenNotified()) pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void SignalWatcher::Run() {
  const sigset_t set = DrainSignals();
  int signal = 0;
  if (sigwait(&set, &signal) != 0) return;
  signal_ = signal;
  received_.Notify();
}

}  // namespace loom
