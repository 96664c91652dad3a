// The CPU executor's worker pool: a fixed set of threads that split each
// kernel's index range. Workers spin briefly between runs (a decode step issues
// hundreds of short kernels) and then sleep on a condition variable.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {

class ThreadPool final : public ParallelFor {
 public:
  // num_threads <= 0: one per hardware thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int NumThreads() const override { return static_cast<int>(workers_.size()) + 1; }
  // Not reentrant: fn must not call Run on the same pool.
  void Run(int64_t n, int64_t grain,
           const std::function<void(int64_t begin, int64_t end)>& fn) override;

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  // mu_ guards no member: it only orders a sleeping worker's check of
  // generation_ against the bump that wakes it. Every field below is an atomic
  // or the job published by the release increment of generation_.
  Mutex mu_;
  CondVar wake_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  // The current job, published by the release increment of generation_.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<int> busy_workers_{0};
};

}  // namespace loom::kernels::cpu
