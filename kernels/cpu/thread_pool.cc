#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#include "base/check.h"

namespace loom::kernels::cpu {
namespace {

// About a millisecond of polling before a worker goes to sleep: longer than the
// gap between two kernels of a step (and usually between steps), short enough
// that an idle engine costs no CPU. Past kPauseIterations the loops yield, so
// that on an oversubscribed machine a spinning thread hands its core to the
// thread it is waiting for.
constexpr int kSpinIterations = 4000;
constexpr int kPauseIterations = 2000;

inline void Backoff(int iteration) {
  if (iteration < kPauseIterations) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    num_threads = std::max(1u, std::thread::hardware_concurrency());
  }
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    // Bump under the lock so a worker that checked the generation cannot miss it.
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.NotifyAll();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) return;
    (*fn_)(begin, std::min(n_, begin + grain_));
  }
}

void ThreadPool::Run(int64_t n, int64_t grain,
                     const std::function<void(int64_t begin, int64_t end)>& fn) {
  LOOM_CHECK_GE(grain, 1);
  if (n <= 0) return;
  if (workers_.empty() || n <= grain) {
    for (int64_t begin = 0; begin < n; begin += grain) fn(begin, std::min(n, begin + grain));
    return;
  }
  LOOM_CHECK_EQ(busy_workers_.load(std::memory_order_acquire), 0) << "ThreadPool::Run nested";
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.NotifyAll();
  RunChunks();
  for (int i = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++i) Backoff(i);
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int i = 0; current == seen && i < kSpinIterations; ++i) {
      Backoff(i);
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      MutexLock lock(mu_);
      while (generation_.load(std::memory_order_acquire) == seen) wake_.Wait(mu_);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load(std::memory_order_relaxed)) return;
    RunChunks();
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace loom::kernels::cpu
