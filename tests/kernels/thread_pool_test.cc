#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels::cpu {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnceInRangesOfAtMostGrain) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.NumThreads(), threads);
    for (int64_t n : {0, 1, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<bool> oversized{false};
        pool.Run(n, grain, [&](int64_t begin, int64_t end) {
          if (end - begin > grain && n > grain) oversized = true;
          for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        EXPECT_FALSE(oversized);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
      }
    }
  }
}

TEST(ThreadPoolTest, UsesMoreThanOneThreadWhenAvailable) {
  ThreadPool pool(2);
  std::atomic<int> concurrent{0};
  std::atomic<int> peak{0};
  // Each chunk waits (bounded) until the other thread has also entered a chunk.
  pool.Run(2, 1, [&](int64_t, int64_t) {
    const int now = concurrent.fetch_add(1) + 1;
    int expected = peak.load();
    while (now > expected && !peak.compare_exchange_weak(expected, now)) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (peak.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    concurrent.fetch_sub(1);
  });
  EXPECT_EQ(peak.load(), 2);
}

}  // namespace
}  // namespace loom::kernels::cpu
