// The OutputSink a Generate reactor hands to the engine. The engine holds it,
// possibly beyond the reactor's life: the reactor's OnDone detaches it, so a
// late Push finds no reactor instead of a freed one.
#pragma once

#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "engine/request_output.h"

namespace loom {

// Reactor must befriend ReactorSink<Reactor> and have OnOutput(RequestOutput).
template <typename Reactor>
class ReactorSink final : public OutputSink {
 public:
  explicit ReactorSink(Reactor* reactor) : reactor_(reactor) {}

  void Push(RequestOutput output) override {
    MutexLock lock(mu_);
    if (reactor_ != nullptr) {
      reactor_->OnOutput(std::move(output));
    }
  }

  // Runs f(reactor) under the sink's lock unless the reactor is gone; false
  // when it is.
  template <typename F>
  bool Visit(F f) {
    MutexLock lock(mu_);
    if (reactor_ == nullptr) {
      return false;
    }
    f(*reactor_);
    return true;
  }

  void Detach() {
    MutexLock lock(mu_);
    reactor_ = nullptr;
  }

 private:
  Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom
