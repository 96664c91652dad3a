// The OutputSink a Generate reactor hands to the engine. The engine holds it,
// possibly beyond the reactor's life: the reactor's OnDone detaches it, so a
// late Push finds no reactor instead of a freed one.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "engine/request_output.h"

namespace loom {

// gRPC runs a reactor's constructor, its callbacks and its OnDone on different
// threads and orders them with synchronization inside its uninstrumented
// libraries, which ThreadSanitizer cannot see. Work on a reactor calls
// ReactorRelease() after its last access to the reactor before handing it to
// gRPC (Finish, StartWrite, returning from the constructor or OnCancel), and
// OnCancel, OnWriteDone and OnDone call ReactorAcquire() first: the order gRPC guarantees,
// made visible to TSan. The clock is process-wide because the reactor's own
// memory, mutex included, is what OnDone frees. Only the tsan build keeps the
// clock; elsewhere both calls are empty.
#if defined(__SANITIZE_THREAD__)
#define LOOM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOOM_TSAN 1
#endif
#endif
#if defined(LOOM_TSAN)
inline std::atomic<uint64_t> reactor_order_clock{0};
inline void ReactorRelease() { reactor_order_clock.fetch_add(1, std::memory_order_acq_rel); }
inline void ReactorAcquire() { (void)reactor_order_clock.load(std::memory_order_acquire); }
#else
inline void ReactorRelease() {}
inline void ReactorAcquire() {}
#endif

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
