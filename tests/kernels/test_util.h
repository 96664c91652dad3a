// Helpers shared by the CPU kernel tests: seeded random buffers and an
// llm.c-style closeness check (|a - b| <= atol + rtol * |ref|).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace loom::kernels {

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& ref, float atol,
                        float rtol) {
  ASSERT_EQ(got.size(), ref.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    if (!(std::fabs(got[i] - ref[i]) <= atol + rtol * std::fabs(ref[i]))) {
      ADD_FAILURE() << "index " << i << ": got " << got[i] << " want " << ref[i];
      ++failures;
    }
  }
}

// A row's bits do not depend on the other rows of the product: each window
// (first row, rows) computed alone by run(first, rows), [rows, n], equals
// the same rows of run(0, m) byte for byte.
template <class Run>
void ExpectWindowsMatchTheWhole(Run run, int32_t m, int32_t n,
                                std::initializer_list<std::pair<int32_t, int32_t>> windows) {
  const std::vector<float> all = run(0, m);
  for (auto [first, rows] : windows) {
    const std::vector<float> part = run(first, rows);
    ASSERT_EQ(0, std::memcmp(part.data(), all.data() + static_cast<size_t>(first) * n,
                             part.size() * sizeof(float)))
        << rows << " rows from " << first;
  }
}

}  // namespace loom::kernels
