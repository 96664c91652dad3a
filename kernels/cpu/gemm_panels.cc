#include "kernels/cpu/gemm_panels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace loom::kernels::cpu::panels {
namespace {

#define LOOM_PANEL_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMr = 6;  // rows of C per block: 12 accumulators, 2 of B, 1 of A

// Half `h` (columns [8h, 8h + 8)) of a row of C, read through a stack copy
// when the panel has fewer real columns than kWidth.
LOOM_PANEL_AVX2 inline __m256 LoadHalf(const float* c, int columns, int h) {
  if (columns == kWidth) return _mm256_loadu_ps(c + 8 * h);
  float row[kWidth] = {};
  std::memcpy(row, c, sizeof(float) * columns);
  return _mm256_loadu_ps(row + 8 * h);
}

LOOM_PANEL_AVX2 inline void StoreRow(float* c, int columns, __m256 lo, __m256 hi) {
  if (columns == kWidth) {
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
    return;
  }
  float row[kWidth];
  _mm256_storeu_ps(row, lo);
  _mm256_storeu_ps(row + 8, hi);
  std::memcpy(c, row, sizeof(float) * columns);
}

// C rows [0, MR) of the block at a (and c). GCC 12 (-O3) keeps acc in 12
// registers only with all three of: the loops over rows unrolled by pragma,
// acc never passed by reference (LoadHalf returns its vector), and the k
// loop's bounds and strides in locals. Without any one of them it kept acc
// as a stack array and stored every accumulator back after each FMA, 12
// stores a step of k where the core retires one a cycle, which halved the
// FMA rate (99 against 175 GFLOP/s at 512 x 1536 x 576 on two Zen 2 cores).
// The arithmetic is the same either way.
template <int MR>
LOOM_PANEL_AVX2 void Block(const Operands& p, const float* a, float* c) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (p.accumulate) {
      acc[r][0] = LoadHalf(c + r * p.ldc, p.columns, 0);
      acc[r][1] = LoadHalf(c + r * p.ldc, p.columns, 1);
    } else {
      acc[r][0] = _mm256_setzero_ps();
      acc[r][1] = _mm256_setzero_ps();
    }
  }
  const float* b = p.b;
  const int32_t k = p.k;
  const int64_t lda = p.lda;
  const int64_t ldb = p.ldb;
  for (int32_t kk = 0; kk < k; ++kk, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  const __m256 bias0 = p.bias != nullptr ? LoadHalf(p.bias, p.columns, 0) : _mm256_setzero_ps();
  const __m256 bias1 = p.bias != nullptr ? LoadHalf(p.bias, p.columns, 1) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (p.bias != nullptr) {
      acc[r][0] = _mm256_add_ps(acc[r][0], bias0);
      acc[r][1] = _mm256_add_ps(acc[r][1], bias1);
    }
    StoreRow(c + r * p.ldc, p.columns, acc[r][0], acc[r][1]);
  }
}

using BlockFn = void (*)(const Operands&, const float*, float*);
constexpr BlockFn kBlocks[kMr] = {Block<1>, Block<2>, Block<3>, Block<4>, Block<5>, Block<6>};

}  // namespace

void Gemm(const Operands& p) {
  LOOM_CHECK(p.columns >= 1 && p.columns <= kWidth) << p.columns;
  LOOM_CHECK_GE(p.ldb, kWidth);
  for (int32_t i = 0; i < p.m; i += kMr) {
    const int rows = std::min<int32_t>(kMr, p.m - i);
    kBlocks[rows - 1](p, p.a + i * p.lda, p.c + i * p.ldc);
  }
}

void Pack(const float* rows, int64_t ld, int count, int k, float* panel) {
  LOOM_CHECK(count >= 0 && count <= kWidth) << count;
  for (int kk = 0; kk < k; ++kk) {
    float* out = panel + static_cast<int64_t>(kk) * kWidth;
    for (int j = 0; j < count; ++j) out[j] = rows[j * ld + kk];
    std::fill(out + count, out + kWidth, 0.0f);
  }
}

}  // namespace loom::kernels::cpu::panels
