#include "kernels/cpu/matmul_quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/matmul_quant_blocks.h"
#include "kernels/cpu/simd_reduce.h"

namespace loom::kernels::cpu::dot {
namespace {

#define LOOM_DOT_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

constexpr int kMr = 4;  // rows of x per pass over a row of W (kept in L1)

// x rounded to int16 per block of 32: row i's block b is q[(i * blocks + b) *
// 32 ...], its values in the order the kernels widen W's bytes to int16
// (vpunpck{l,h}bw work per 128-bit lane): [0, 8), [16, 24), then [8, 16),
// [24, 32).
struct Activations16 {
  std::vector<int16_t> q;    // [m, k]
  std::vector<float> scale;  // [m, blocks]: max |x| / 32767
  std::vector<float> sum;    // [m, blocks]: the block's float32 sum of x
  int64_t blocks = 0;
};

// x rounded to int8 per block of 32, in value order, for the K-quants.
struct Activations8 {
  std::vector<int8_t> q;     // [m, k]
  std::vector<float> scale;  // [m, blocks]: max |x| / 127
  std::vector<float> sum;    // [m, blocks]: each block's float32 sum of x
  // [m, k / 16]: the sums of q per 16 values times the scale (Q6_K's -32
  // takes the rounded x, as the int16 path's does).
  std::vector<float> sum16;
  int64_t blocks = 0;
};

// A block of 32 values of x rounded to nearest (even) integers of at most
// `top` in magnitude, q = x * (top / max |x|): qi[g] holds values [8 g,
// 8 g + 8) as int32. Returns max |x|; `sum` gets the block's float32 sum.
LOOM_DOT_AVX2_TARGET float RoundBlock(const float* x, float top, __m256i (&qi)[4], float& sum) {
  __m256 v[4];
  const float max = LoadBlock32(x, v);
  const __m256 inv = _mm256_set1_ps(max > 0.0f ? top / max : 0.0f);
  for (int g = 0; g < 4; ++g) qi[g] = _mm256_cvtps_epi32(_mm256_mul_ps(v[g], inv));
  sum = Sum8(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
  return max;
}

// One row in int16, |q| <= 32767.
LOOM_DOT_AVX2_TARGET void QuantizeRow(const float* x, int64_t blocks, int16_t* q, float* scale,
                                      float* sum) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i qi[4];
    const float max = RoundBlock(x + b * kQuantBlock, 32767.0f, qi, sum[b]);
    // packs works per 128-bit lane: [x0-3 | x16-19] with [x4-7 | x20-23]
    // packs to [x0-7 | x16-23].
    for (int h = 0; h < 2; ++h) {
      const __m256i a = _mm256_permute2x128_si256(qi[h], qi[h + 2], 0x20);
      const __m256i c = _mm256_permute2x128_si256(qi[h], qi[h + 2], 0x31);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQuantBlock + 16 * h),
                          _mm256_packs_epi32(a, c));
    }
    scale[b] = max / 32767.0f;
  }
}

// One row in int8, |q| <= 127.
LOOM_DOT_AVX2_TARGET void QuantizeRow(const float* x, int64_t blocks, int8_t* q, float* scale,
                                      float* sum, float* sum16) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i qi[4];
    const float max = RoundBlock(x + b * kQuantBlock, 127.0f, qi, sum[b]);
    // The packs interleave the 128-bit lanes; the permute restores the order.
    const __m256i q16 =
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(q + b * kQuantBlock),
        _mm256_permutevar8x32_epi32(q16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    scale[b] = max / 127.0f;
    sum16[2 * b] = scale[b] * static_cast<float>(SumI32(_mm256_add_epi32(qi[0], qi[1])));
    sum16[2 * b + 1] = scale[b] * static_cast<float>(SumI32(_mm256_add_epi32(qi[2], qi[3])));
  }
}

void Quantize(const MatmulQuantParams& p, Activations16& a) {
  a.blocks = p.k / kQuantBlock;
  a.q.resize(static_cast<size_t>(p.m) * p.k);
  a.scale.resize(static_cast<size_t>(p.m) * a.blocks);
  a.sum.resize(a.scale.size());
  for (int64_t i = 0; i < p.m; ++i) {
    QuantizeRow(p.x + i * p.ldx, a.blocks, a.q.data() + i * p.k, a.scale.data() + i * a.blocks,
                a.sum.data() + i * a.blocks);
  }
}

void Quantize(const MatmulQuantParams& p, Activations8& a) {
  a.blocks = p.k / kQuantBlock;
  a.q.resize(static_cast<size_t>(p.m) * p.k);
  a.scale.resize(static_cast<size_t>(p.m) * a.blocks);
  a.sum.resize(a.scale.size());
  a.sum16.resize(a.scale.size() * 2);
  for (int64_t i = 0; i < p.m; ++i) {
    QuantizeRow(p.x + i * p.ldx, a.blocks, a.q.data() + i * p.k, a.scale.data() + i * a.blocks,
                a.sum.data() + i * a.blocks, a.sum16.data() + i * a.blocks * 2);
  }
}

// GCC 12 warns (-Wuninitialized) inside some conversion intrinsics, which
// are built on _mm256_undefined_*; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace avx2 {
#define LOOM_DOT_TARGET LOOM_DOT_AVX2_TARGET
#define LOOM_DOT_VNNI 0
#include "kernels/cpu/matmul_quant_dot_kernels.inc"
#undef LOOM_DOT_TARGET
#undef LOOM_DOT_VNNI
}  // namespace avx2

namespace vnni {
#define LOOM_DOT_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define LOOM_DOT_VNNI 1
#include "kernels/cpu/matmul_quant_dot_kernels.inc"
#undef LOOM_DOT_TARGET
#undef LOOM_DOT_VNNI
}  // namespace vnni

#pragma GCC diagnostic pop

}  // namespace

bool Supported(QuantType type, SimdLevel level, XBits bits) {
  if (level < SimdLevel::kAvx2) return false;
  if (bits == XBits::k8) {
    return type == QuantType::kQ4_K || type == QuantType::kQ5_K || type == QuantType::kQ6_K;
  }
  return type != QuantType::kQ2_K && type != QuantType::kQ3_K;
}

bool UsesVnni(SimdLevel level) { return level == SimdLevel::kAvx512 && HasAvx512Vnni(); }

void MatmulDot(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task,
               SimdLevel level, XBits bits) {
  LOOM_CHECK(Supported(p.type, level, bits));
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  auto run = [&](auto& a) {
    Quantize(p, a);
    if (UsesVnni(level)) {
      vnni::Run(p, a, pool, rows_per_task);
    } else {
      avx2::Run(p, a, pool, rows_per_task);
    }
  };
  if (bits == XBits::k8) {
    thread_local Activations8 a;
    run(a);
  } else {
    thread_local Activations16 a;
    run(a);
  }
}

}  // namespace loom::kernels::cpu::dot
