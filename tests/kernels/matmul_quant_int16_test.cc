#include "kernels/cpu/matmul_quant_int16.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/random_blocks.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

constexpr QuantType kTypes[] = {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,
                                QuantType::kQ5_0, QuantType::kQ5_1, QuantType::kQ4_K,
                                QuantType::kQ5_K, QuantType::kQ6_K};

bool Available() { return int16::Supported(QuantType::kQ4_1, DetectedSimd()); }

std::vector<float> Dequantized(QuantType type, const std::vector<std::byte>& w, int32_t n,
                               int32_t k) {
  std::vector<float> out(static_cast<size_t>(n) * k);
  DequantizeBlocks(type, w.data(), int64_t{n} * k, out.data());
  return out;
}

std::vector<float> Product(const MatmulQuantParams& params, ParallelFor& pool) {
  std::vector<float> y(static_cast<size_t>(params.m) * params.ldy, 0.0f);
  MatmulQuantParams p = params;
  p.y = y.data();
  p.int16_x = true;
  MatmulQuant(p, pool);
  return y;
}

// |y - x W^T| within the rounding of x (half a step of max |x_b| / xmax per
// value of block b) times |w|, plus float32's rounding of the sums.
void ExpectWithinInt16Bound(QuantType type, const std::vector<float>& x, int32_t ldx,
                            const std::vector<float>& w, const std::vector<float>& y, int32_t ldy,
                            int32_t m, int32_t n, int32_t k) {
  const double xmax = type == QuantType::kQ6_K ? 16383.0 : 32767.0;
  int failures = 0;
  for (int32_t i = 0; i < m && failures < 5; ++i) {
    for (int32_t j = 0; j < n && failures < 5; ++j) {
      double exact = 0.0, bound = 0.0, magnitude = 0.0;
      for (int32_t b = 0; b < k / 32; ++b) {
        double max = 0.0, wsum = 0.0;
        for (int32_t t = b * 32; t < b * 32 + 32; ++t) {
          const double xv = x[static_cast<size_t>(i) * ldx + t];
          const double wv = w[static_cast<size_t>(j) * k + t];
          exact += xv * wv;
          magnitude += std::fabs(xv * wv);
          max = std::max(max, std::fabs(xv));
          wsum += std::fabs(wv);
        }
        bound += 0.5 * max / xmax * wsum;
      }
      bound = bound * 1.001 + 1e-6 * magnitude + 1e-30;
      const double got = y[static_cast<size_t>(i) * ldy + j];
      if (std::fabs(got - exact) > bound) {
        ADD_FAILURE() << "row " << i << " col " << j << ": " << got << " vs " << exact << " (bound "
                      << bound << ")";
        ++failures;
      }
    }
  }
}

// Every type, batch sizes on both sides of the 8- and 16-lane tiles and past
// a chunk of 16 tiles, odd strides and a bias: within the rounding of x, and
// not the float32 result.
TEST(MatmulInt16Test, StaysWithinTheRoundingOfX) {
  if (!Available()) GTEST_SKIP() << "no AVX-512 VNNI";
  ThreadPool pool(3);
  uint32_t seed = 100;
  for (QuantType type : kTypes) {
    for (int32_t m : {1, 4, 8, 9, 16, 17, 33, 270}) {
      for (int32_t n : {1, 13, 64}) {
        for (int32_t k : {256, 512}) {
          SCOPED_TRACE(testing::Message()
                       << QuantTypeName(type) << " m " << m << " n " << n << " k " << k);
          const int32_t ldx = k + 3, ldy = n + 2;
          std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed, -2, 2);
          // Blocks of very different scales: each has its own.
          for (int32_t i = 0; i < m; ++i) x[static_cast<size_t>(i) * ldx + (i * 37) % k] *= 1000.0f;
          const std::vector<std::byte> w =
              RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), ++seed);
          const std::vector<float> bias = RandomVector(n, ++seed);
          const MatmulQuantParams p{x.data(), w.data(), type, bias.data(), nullptr,
                                    m,        n,        k,    ldx,         ldy};
          const std::vector<float> y = Product(p, pool);
          std::vector<float> y_bias = y;
          for (int32_t i = 0; i < m; ++i) {
            for (int32_t j = 0; j < n; ++j) y_bias[static_cast<size_t>(i) * ldy + j] -= bias[j];
          }
          ExpectWithinInt16Bound(type, x, ldx, Dequantized(type, w, n, k), y_bias, ldy, m, n, k);
          std::vector<float> exact(y.size(), 0.0f);
          MatmulQuantParams f = p;
          f.y = exact.data();
          MatmulQuant(f, pool);
          EXPECT_NE(exact, y);
        }
      }
    }
  }
}

// A row's output bits do not depend on the other rows of the batch, nor on
// their number: 8-lane and 16-lane tiles, and tiles past the first chunk.
// (Steps of fewer than 8 rows take the dot path, matmul_quant_dot_test.cc.)
TEST(MatmulInt16Test, RowResultDoesNotDependOnTheBatch) {
  if (!Available()) GTEST_SKIP() << "no AVX-512 VNNI";
  ThreadPool pool(2);
  const int32_t n = 45, k = 512, m = 300;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 5);
  for (QuantType type : {QuantType::kQ4_1, QuantType::kQ5_0, QuantType::kQ6_K}) {
    SCOPED_TRACE(QuantTypeName(type));
    const std::vector<std::byte> w = RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), 6);
    auto run = [&](int32_t first_row, int32_t rows) {
      return Product({x.data() + static_cast<size_t>(first_row) * k, w.data(), type, nullptr,
                      nullptr, rows, n, k, k, n},
                     pool);
    };
    ExpectWindowsMatchTheWhole(run, m, n,
                               {{0, 8}, {3, 12}, {290, 8}, {7, 9}, {100, 16}, {250, 33}});
  }
}

// The largest integers each type can hold, times x at its largest in every
// value: the int32 sums do not overflow.
TEST(MatmulInt16Test, LargestValuesDoNotOverflow) {
  if (!Available()) GTEST_SKIP() << "no AVX-512 VNNI";
  ThreadPool pool(1);
  const int32_t m = 16, n = 8, k = 256;
  for (QuantType type : kTypes) {
    SCOPED_TRACE(QuantTypeName(type));
    const int64_t blocks = int64_t{n} * k / QuantBlockValues(type);
    const std::vector<std::byte> w = LargestBlocks(type, blocks, 9);
    const std::vector<float> x(static_cast<size_t>(m) * k, -3.0f);
    const std::vector<float> y =
        Product({x.data(), w.data(), type, nullptr, nullptr, m, n, k, k, n}, pool);
    ExpectWithinInt16Bound(type, x, k, Dequantized(type, w, n, k), y, n, m, n, k);
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
