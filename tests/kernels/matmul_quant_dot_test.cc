#include "kernels/cpu/matmul_quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/float16.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant_blocks.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/random_blocks.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

using dot::XBits;

constexpr QuantType kTypes16[] = {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,
                                  QuantType::kQ5_0, QuantType::kQ5_1, QuantType::kQ4_K,
                                  QuantType::kQ5_K, QuantType::kQ6_K};
constexpr QuantType kTypes8[] = {QuantType::kQ4_K, QuantType::kQ5_K, QuantType::kQ6_K};

struct XRounding {
  double max;
  int32_t group;
};

struct DotCase {
  SimdLevel level;
  XBits bits;
};

// The dot kernels of a level and width of x: AVX2's vpmaddwd and vpmaddubsw
// (run on every AVX2 CPU, on an AVX-512 machine too) or AVX-512 VNNI's
// vpdpwssd and vpdpbusd (only where the CPU has it; the tests of that level
// skip elsewhere and say so).
class MatmulDotTest : public testing::TestWithParam<DotCase> {
 protected:
  void SetUp() override {
    if (DetectedSimd() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
    if (level() == SimdLevel::kAvx512 && !dot::UsesVnni(DetectedSimd())) {
      GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or LOOM_SIMD caps it): the vpdpwssd and "
                      "vpdpbusd kernels are not run here";
    }
  }
  SimdLevel level() const { return GetParam().level; }
  XBits bits() const { return GetParam().bits; }
  // How x is rounded: to integers up to max, one scale per group of values
  // (a block of 32).
  XRounding rounding() const {
    return bits() == XBits::k16 ? XRounding{32767.0, 32} : XRounding{127.0, 32};
  }
  std::vector<QuantType> types() const {
    return bits() == XBits::k16 ? std::vector<QuantType>(std::begin(kTypes16), std::end(kTypes16))
                                : std::vector<QuantType>(std::begin(kTypes8), std::end(kTypes8));
  }
  std::string name() const {
    return std::string(SimdName(level())) + (bits() == XBits::k16 ? " int16 " : " int8 ");
  }
};

INSTANTIATE_TEST_SUITE_P(
    Levels, MatmulDotTest,
    testing::Values(DotCase{SimdLevel::kAvx2, XBits::k16}, DotCase{SimdLevel::kAvx512, XBits::k16},
                    DotCase{SimdLevel::kAvx2, XBits::k8}, DotCase{SimdLevel::kAvx512, XBits::k8}),
    [](const testing::TestParamInfo<DotCase>& info) {
      return std::string(info.param.level == SimdLevel::kAvx2 ? "Avx2" : "Avx512Vnni") +
             (info.param.bits == XBits::k16 ? "Int16" : "Int8");
    });

std::vector<float> Dequantized(QuantType type, const std::vector<std::byte>& w, int32_t n,
                               int32_t k) {
  std::vector<float> out(static_cast<size_t>(n) * k);
  DequantizeBlocks(type, w.data(), int64_t{n} * k, out.data());
  return out;
}

// M_b of each block of 32 of W (w = D q + M_b): Q4_1's and Q5_1's m, the
// K-quants' -dmin mn; 0 for the others. [n, k / 32].
std::vector<double> BlockOffsets(QuantType type, const std::vector<std::byte>& w, int32_t n,
                                 int32_t k) {
  std::vector<double> out(static_cast<size_t>(n) * (k / 32), 0.0);
  const int64_t bytes = QuantBlockBytes(type);
  const int values = QuantBlockValues(type);
  for (size_t b32 = 0; b32 < out.size(); ++b32) {
    const std::byte* block = w.data() + static_cast<int64_t>(b32 * 32 / values) * bytes;
    uint16_t h[2];
    std::memcpy(h, block, sizeof(h));
    if (type == QuantType::kQ4_1 || type == QuantType::kQ5_1) out[b32] = HalfToFloat(h[1]);
    if (type == QuantType::kQ4_K || type == QuantType::kQ5_K) {
      int sc, mn;
      ScaleMinK4(static_cast<int>(b32 % 8), reinterpret_cast<const uint8_t*>(block + 4), sc, mn);
      out[b32] = -static_cast<double>(HalfToFloat(h[1])) * mn;
    }
  }
  return out;
}

std::vector<float> Product(const MatmulQuantParams& params, ParallelFor& pool, SimdLevel level,
                           XBits bits) {
  std::vector<float> y(static_cast<size_t>(params.m) * params.ldy, 0.0f);
  MatmulQuantParams p = params;
  p.y = y.data();
  dot::MatmulDot(p, pool, 16, level, bits);
  return y;
}

// |y - x W^T| within the rounding of x (half a step of max |x_g| / x.max per
// value of rounding group g) times |w - M_b|, plus float32's rounding of the
// sums.
void ExpectWithinBound(XRounding xr, QuantType type, const std::vector<float>& x, int32_t ldx,
                       const std::vector<std::byte>& blocks, const std::vector<float>& y,
                       int32_t ldy, int32_t m, int32_t n, int32_t k) {
  const std::vector<float> w = Dequantized(type, blocks, n, k);
  const std::vector<double> offsets = BlockOffsets(type, blocks, n, k);
  int failures = 0;
  for (int32_t i = 0; i < m && failures < 5; ++i) {
    for (int32_t j = 0; j < n && failures < 5; ++j) {
      double exact = 0.0, bound = 0.0, magnitude = 0.0;
      for (int32_t g = 0; g < k / xr.group; ++g) {
        double max = 0.0, wsum = 0.0;
        for (int32_t t = g * xr.group; t < (g + 1) * xr.group; ++t) {
          const double offset = offsets[static_cast<size_t>(j) * (k / 32) + t / 32];
          const double xv = x[static_cast<size_t>(i) * ldx + t];
          const double wv = w[static_cast<size_t>(j) * k + t];
          exact += xv * wv;
          magnitude += std::fabs(xv * wv);
          max = std::max(max, std::fabs(xv));
          wsum += std::fabs(wv - offset);
        }
        bound += 0.5 * max / xr.max * wsum;
      }
      bound = bound * 1.001 + 1e-6 * magnitude + 1e-30;
      const double got = y[static_cast<size_t>(i) * ldy + j];
      if (!(std::fabs(got - exact) <= bound)) {
        ADD_FAILURE() << "row " << i << " col " << j << ": " << got << " vs " << exact << " (bound "
                      << bound << ")";
        ++failures;
      }
    }
  }
}

// Every type; 1 to 9 rows (the 4-row passes and their remainders),
// odd strides, a bias, and a value 1000 times the rest in each row: within
// the rounding of x, and not the float32 result.
TEST_P(MatmulDotTest, StaysWithinTheRoundingOfX) {
  ThreadPool pool(3);
  uint32_t seed = 300;
  for (QuantType type : types()) {
    for (int32_t m : {1, 2, 3, 4, 5, 7, 9}) {
      for (int32_t n : {1, 13, 64}) {
        for (int32_t k : {256, 512}) {
          SCOPED_TRACE(testing::Message()
                       << name() << QuantTypeName(type) << " m " << m << " n " << n << " k " << k);
          const int32_t ldx = k + 3, ldy = n + 2;
          std::vector<float> x = RandomVector(static_cast<size_t>(m) * ldx, ++seed, -2, 2);
          for (int32_t i = 0; i < m; ++i) x[static_cast<size_t>(i) * ldx + (i * 37) % k] *= 1000.0f;
          const std::vector<std::byte> w =
              RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), ++seed);
          const std::vector<float> bias = RandomVector(n, ++seed);
          const MatmulQuantParams p{x.data(), w.data(), type, bias.data(), nullptr,
                                    m,        n,        k,    ldx,         ldy};
          const std::vector<float> y = Product(p, pool, level(), bits());
          std::vector<float> y_bias = y;
          for (int32_t i = 0; i < m; ++i) {
            for (int32_t j = 0; j < n; ++j) y_bias[static_cast<size_t>(i) * ldy + j] -= bias[j];
          }
          ExpectWithinBound(rounding(), type, x, ldx, w, y_bias, ldy, m, n, k);
          std::vector<float> exact(y.size(), 0.0f);
          MatmulQuantParams f = p;
          f.y = exact.data();
          MatmulQuant(f, pool, level());
          EXPECT_NE(exact, y);
        }
      }
    }
  }
}

// Through MatmulQuant: int16_x takes the dot path where it is chosen, the
// K-quants up to 32 rows (below 8 with VNNI, where the tiles start) and the
// 32-value blocks up to 3; from 4 rows those take the float32 tiles.
// quantize_x takes the int8 dots for the K-quants up to 32 rows.
TEST_P(MatmulDotTest, MatmulQuantTakesTheDotPathForFewRows) {
  ThreadPool pool(2);
  const int32_t n = 40, k = 512;
  const bool int16 = bits() == XBits::k16;
  const std::vector<QuantType> types =
      int16 ? std::vector<QuantType>{QuantType::kQ4_K, QuantType::kQ6_K, QuantType::kQ4_1}
            : std::vector<QuantType>{QuantType::kQ4_K, QuantType::kQ5_K, QuantType::kQ6_K};
  for (QuantType type : types) {
    SCOPED_TRACE(name() + QuantTypeName(type));
    const std::vector<std::byte> w =
        RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), 41);
    const bool super_blocks = QuantBlockValues(type) == kSuperBlock;
    const int32_t dot_rows = !super_blocks ? 3 : int16 && level() == SimdLevel::kAvx512 ? 7 : 32;
    for (int32_t m : {1, 3, 4, 7, 32, 33}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 42 + m);
      MatmulQuantParams p{x.data(), w.data(), type, nullptr, nullptr, m, n, k, k, n};
      std::vector<float> y(static_cast<size_t>(m) * n), float32(y.size());
      p.y = float32.data();
      MatmulQuant(p, pool, level());
      p.y = y.data();
      p.int16_x = int16;
      p.quantize_x = !int16;
      MatmulQuant(p, pool, level());
      if (m <= dot_rows) {
        EXPECT_EQ(y, Product(p, pool, level(), bits())) << m << " rows";
      } else if (m < 8 || !int16) {
        EXPECT_EQ(y, float32) << m << " rows";
      }
    }
  }
}

// Each value of x rounded as the path rounds it (q = x * (x.max / max)
// to nearest, x ~ q * max / x.max), multiplied by the dequantized W in
// double, with the offsets' terms on the unrounded sums of x: equal up to
// float32's rounding of the sums. A block in the wrong lanes, or a value
// paired with the wrong x, is far outside this.
TEST_P(MatmulDotTest, EqualsTheProductOfRoundedX) {
  ThreadPool pool(2);
  const int32_t m = 3, n = 21, k = 768;
  for (QuantType type : types()) {
    SCOPED_TRACE(name() + QuantTypeName(type));
    const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 77, -3, 3);
    const std::vector<std::byte> blocks =
        RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), 78);
    const std::vector<float> y = Product(
        {x.data(), blocks.data(), type, nullptr, nullptr, m, n, k, k, n}, pool, level(), bits());
    const std::vector<float> w = Dequantized(type, blocks, n, k);
    const std::vector<double> offsets = BlockOffsets(type, blocks, n, k);
    for (int32_t i = 0; i < m; ++i) {
      std::vector<double> xr(k);
      const int32_t group = rounding().group;
      for (int32_t g = 0; g < k / group; ++g) {
        float max = 0.0f;
        for (int32_t t = g * group; t < (g + 1) * group; ++t) {
          max = std::max(max, std::fabs(x[i * k + t]));
        }
        const auto top = static_cast<float>(rounding().max);
        const float inv = top / max, scale = max / top;
        for (int32_t t = g * group; t < (g + 1) * group; ++t) {
          xr[t] = static_cast<double>(std::nearbyint(x[i * k + t] * inv)) * scale;
        }
      }
      for (int32_t j = 0; j < n; ++j) {
        double want = 0.0, magnitude = 0.0;
        for (int32_t t = 0; t < k; ++t) {
          const double offset = offsets[static_cast<size_t>(j) * (k / 32) + t / 32];
          const double wv = w[static_cast<size_t>(j) * k + t];
          want += (wv - offset) * xr[t] + offset * x[i * k + t];
          magnitude += std::fabs(wv * x[i * k + t]);
        }
        EXPECT_NEAR(y[static_cast<size_t>(i) * n + j], want, 1e-5 * magnitude + 1e-30)
            << "row " << i << " col " << j;
      }
    }
  }
}

// A row's output bits do not depend on the other rows of the step, nor on
// their number.
TEST_P(MatmulDotTest, RowResultDoesNotDependOnTheBatch) {
  ThreadPool pool(2);
  const int32_t n = 45, k = 512, m = 37;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, 5);
  for (QuantType type : {QuantType::kQ4_1, QuantType::kQ5_0, QuantType::kQ4_K, QuantType::kQ6_K}) {
    if (!dot::Supported(type, level(), bits())) continue;
    SCOPED_TRACE(name() + QuantTypeName(type));
    const std::vector<std::byte> w = RandomBlocks(type, int64_t{n} * k / QuantBlockValues(type), 6);
    auto run = [&](int32_t first_row, int32_t rows) {
      return Product({x.data() + static_cast<size_t>(first_row) * k, w.data(), type, nullptr,
                      nullptr, rows, n, k, k, n},
                     pool, level(), bits());
    };
    ExpectWindowsMatchTheWhole(run, m, n, {{0, 1}, {3, 4}, {7, 2}, {10, 3}, {20, 17}, {36, 1}});
  }
}

// The largest integers each type holds, times x at its largest in every
// value: no int16 or int32 sum overflows.
TEST_P(MatmulDotTest, LargestValuesDoNotOverflow) {
  ThreadPool pool(1);
  const int32_t m = 2, n = 8, k = 256;
  for (QuantType type : types()) {
    SCOPED_TRACE(name() + QuantTypeName(type));
    const int64_t blocks = int64_t{n} * k / QuantBlockValues(type);
    const std::vector<std::byte> w = LargestBlocks(type, blocks, 9);
    const std::vector<float> x(static_cast<size_t>(m) * k, -3.0f);
    const std::vector<float> y =
        Product({x.data(), w.data(), type, nullptr, nullptr, m, n, k, k, n}, pool, level(), bits());
    ExpectWithinBound(rounding(), type, x, k, w, y, n, m, n, k);
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
