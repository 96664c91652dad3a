// The machine's memory read bandwidth, the bound of CPU decode (every step
// reads all of W): THREADS threads each sum their own contiguous share of a
// buffer far larger than the caches, with 32-byte loads, all passes timed
// together from a barrier. Prints the best and the median of the passes in
// GB/s (1e9 bytes), for bench/cpu_serving.sh to divide decode rates by.
//
//   mem_read [THREADS] [MIB] [PASSES]     defaults: all cores, 1024, 12
#include <immintrin.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Sums n bytes (a multiple of 128) as 64-bit lanes; four accumulators keep
// four loads in flight per cycle.
__attribute__((target("avx2"))) uint64_t SumAvx2(const std::byte* p, size_t n) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (size_t off = 0; off < n; off += 128) {
    for (int u = 0; u < 4; ++u) {
      acc[u] = _mm256_add_epi64(
          acc[u], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + off + 32 * u)));
    }
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(
      reinterpret_cast<__m256i*>(lanes),
      _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3])));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t SumScalar(const std::byte* p, size_t n) {
  uint64_t s = 0;
  for (size_t off = 0; off < n; off += 8) {
    uint64_t v;
    std::memcpy(&v, p + off, sizeof(v));
    s += v;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads =
      argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 12;
  if (threads < 1 || mib < 64 || passes < 1) {
    std::fprintf(stderr, "usage: mem_read [THREADS >= 1] [MIB >= 64] [PASSES >= 1]\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  auto* buffer = static_cast<std::byte*>(std::aligned_alloc(4096, bytes));
  if (buffer == nullptr) {
    std::fprintf(stderr, "mem_read: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < bytes; i += 4096) buffer[i] = static_cast<std::byte>(i >> 12);
  const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  const size_t share = bytes / threads / 128 * 128;
  std::vector<double> seconds;
  std::vector<uint64_t> sums(threads);
  std::chrono::steady_clock::time_point start;
  std::barrier sync(threads, [&]() noexcept {
    const auto now = std::chrono::steady_clock::now();
    if (start.time_since_epoch().count() != 0) {
      seconds.push_back(std::chrono::duration<double>(now - start).count());
    }
    start = now;
  });
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::byte* p = buffer + t * share;
      sync.arrive_and_wait();
      for (int pass = 0; pass < passes; ++pass) {
        sums[t] += avx2 ? SumAvx2(p, share) : SumScalar(p, share);
        sync.arrive_and_wait();
      }
    });
  }
  for (std::thread& t : pool) t.join();
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  std::vector<double> rates;
  for (double s : seconds) rates.push_back(static_cast<double>(share) * threads / s / 1e9);
  std::sort(rates.begin(), rates.end());
  std::printf(
      "read bandwidth: %.2f GB/s best, %.2f median (%d threads, %zu MiB, %d passes; %llx)\n",
      rates.back(), rates[rates.size() / 2], threads, mib, passes,
      static_cast<unsigned long long>(check & 0xff));
  std::free(buffer);
  return 0;
}
