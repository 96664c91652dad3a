// Horizontal sums of a register tile's accumulators. Every output of the
// AVX-512 matmul tiles, full or edge, float32 or bfloat16 weights, is summed
// by this one tree, so its bits never depend on which tile computed it.
#pragma once

#include <immintrin.h>

namespace loom::kernels::cpu {

// GCC 12 warns (-Wuninitialized) inside the shuffle intrinsics, which are
// built on _mm512_undefined_ps; the warning is about the header, not us.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Lane l of the result is the sum of the 16 lanes of a[l] (a transpose-and-add
// tree: 45 operations for 16 sums instead of 16 separate reductions).
__attribute__((target("avx512f"))) inline __m512 Reduce16(const __m512* a) {
  __m512 b[8];
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  __m512 c[4];
  for (int i = 0; i < 4; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  }
  __m512 d[2];
  for (int i = 0; i < 2; ++i) {
    d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88),
                       _mm512_shuffle_f32x4(d[0], d[1], 0xDD));
}

// sums[4 * i + j] = horizontal sum of acc[i][j] for a tile of up to 4 x 4.
template <int MR, int NR>
__attribute__((target("avx512f"))) inline void TileSums(const __m512 (&acc)[MR][NR], float* sums) {
  __m512 all[16];
  for (int l = 0; l < 16; ++l) all[l] = _mm512_setzero_ps();
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) all[4 * i + j] = acc[i][j];
  _mm512_storeu_ps(sums, Reduce16(all));
}

// The largest and the sum of the 8 lanes of v (AVX2 paths).
__attribute__((target("avx2"))) inline float Max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
__attribute__((target("avx2"))) inline float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The sum of the 8 int32 lanes of v.
__attribute__((target("avx2"))) inline int32_t SumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

// A block of 32 floats at x into v[0..3], 8 each; returns max |x|: what the
// int8 and int16 paths scale a block of activations by.
__attribute__((target("avx2"))) inline float LoadBlock32(const float* x, __m256 (&v)[4]) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amax = _mm256_setzero_ps();
  for (int g = 0; g < 4; ++g) {
    v[g] = _mm256_loadu_ps(x + 8 * g);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[g], abs_mask));
  }
  return Max8(amax);
}

#pragma GCC diagnostic pop

}  // namespace loom::kernels::cpu
