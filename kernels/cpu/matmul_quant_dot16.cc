#include "kernels/cpu/matmul_quant_dot16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/matmul_quant_blocks.h"
#include "kernels/cpu/simd_reduce.h"

namespace loom::kernels::cpu::dot16 {
namespace {

#define LOOM_DOT_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

constexpr float kXMax = 32767.0f;
constexpr int kMr = 4;  // rows of x per pass over a row of W (kept in L1)

// x rounded to int16 per block of 32: row i's block b is q[(i * blocks + b) *
// 32 ...], its values in the order the kernels widen W's bytes to int16
// (vpunpck{l,h}bw work per 128-bit lane): [0, 8), [16, 24), then [8, 16),
// [24, 32).
struct Activations {
  std::vector<int16_t> q;    // [m, k]
  std::vector<float> scale;  // [m, blocks]: max |x| / 32767
  std::vector<float> sum;    // [m, blocks]: the block's float32 sum of x
  int64_t blocks = 0;
};

// One row: q = x * (32767 / max) rounded to nearest (even), |q| <= 32767.
LOOM_DOT_AVX2_TARGET void QuantizeRow(const float* x, int64_t blocks, int16_t* q, float* scale,
                                      float* sum) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 v[4];
    const float max = LoadBlock32(x + b * kQuantBlock, v);
    const __m256 inv = _mm256_set1_ps(max > 0.0f ? kXMax / max : 0.0f);
    __m256i qi[4];
    for (int g = 0; g < 4; ++g) qi[g] = _mm256_cvtps_epi32(_mm256_mul_ps(v[g], inv));
    // packs works per 128-bit lane: [x0-3 | x16-19] with [x4-7 | x20-23]
    // packs to [x0-7 | x16-23].
    for (int h = 0; h < 2; ++h) {
      const __m256i a = _mm256_permute2x128_si256(qi[h], qi[h + 2], 0x20);
      const __m256i c = _mm256_permute2x128_si256(qi[h], qi[h + 2], 0x31);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQuantBlock + 16 * h),
                          _mm256_packs_epi32(a, c));
    }
    scale[b] = max / kXMax;
    sum[b] = Sum8(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
  }
}

void Quantize(const MatmulQuantParams& p, Activations& a) {
  a.blocks = p.k / kQuantBlock;
  a.q.resize(static_cast<size_t>(p.m) * p.k);
  a.scale.resize(static_cast<size_t>(p.m) * a.blocks);
  a.sum.resize(a.scale.size());
  for (int64_t i = 0; i < p.m; ++i) {
    QuantizeRow(p.x + i * p.ldx, a.blocks, a.q.data() + i * p.k, a.scale.data() + i * a.blocks,
                a.sum.data() + i * a.blocks);
  }
}

bool HasVnni() {
  static const bool yes = __builtin_cpu_supports("avx512vnni") != 0;
  return yes;
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
#include "kernels/cpu/matmul_quant_dot16_kernels.inc"
#undef LOOM_DOT_TARGET
#undef LOOM_DOT_VNNI
}  // namespace avx2

namespace vnni {
#define LOOM_DOT_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define LOOM_DOT_VNNI 1
#include "kernels/cpu/matmul_quant_dot16_kernels.inc"
#undef LOOM_DOT_TARGET
#undef LOOM_DOT_VNNI
}  // namespace vnni

#pragma GCC diagnostic pop

}  // namespace

bool Supported(QuantType type, SimdLevel level) {
  return level >= SimdLevel::kAvx2 && type != QuantType::kQ2_K && type != QuantType::kQ3_K;
}

bool UsesVnni(SimdLevel level) { return level == SimdLevel::kAvx512 && HasVnni(); }

void MatmulDot16(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task,
                 SimdLevel level) {
  LOOM_CHECK(Supported(p.type, level));
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  thread_local Activations a;
  Quantize(p, a);
  if (UsesVnni(level)) {
    vnni::Run(p, a, pool, rows_per_task);
  } else {
    avx2::Run(p, a, pool, rows_per_task);
  }
}

}  // namespace loom::kernels::cpu::dot16
