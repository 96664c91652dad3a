#include "kernels/cpu/attention_decode.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vec_exp.h"

namespace loom::kernels::cpu {
namespace {

#define LOOM_DECODE_AVX2 __attribute__((target("avx2,fma")))

constexpr int kHeadsPerPass = 3;    // query heads whose value sums share the registers
constexpr int kVectorsPerPass = 4;  // 32 dimensions of each

// Element offsets of the item's K/V rows, position by position.
void RowOffsets(const PagedKv<float>& kv, const AttendItem& it, std::vector<size_t>& offsets) {
  offsets.clear();
  const int32_t* table = kv.block_tables + static_cast<size_t>(it.seq) * kv.max_blocks_per_seq;
  int32_t slot = it.begin % kv.block_size;
  for (int32_t b = it.begin / kv.block_size, pos = it.begin; pos < it.end; ++b, slot = 0) {
    const size_t base = kv.Offset(table[static_cast<size_t>(b) * kv.block_stride], it.kv_head, 0);
    for (; slot < kv.block_size && pos < it.end; ++slot, ++pos) {
      offsets.push_back(base + static_cast<size_t>(slot) * kv.head_dim);
    }
  }
}

// Lane i: the sum of the lanes of v[i].
LOOM_DECODE_AVX2 inline __m256 Sum8x8(const __m256 (&v)[8]) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

// scores[g * len + i] = scale * q_g . k_i, 8 positions at a time (a short last
// group repeats its first row and drops the extra sums).
LOOM_DECODE_AVX2 void Scores(const PagedAttentionParams<float>& p, const AttendItem& it,
                             const std::vector<size_t>& offsets, float* scores) {
  const int32_t d = p.kv.head_dim;
  const int32_t group = p.num_heads / p.kv.num_kv_heads;
  const int32_t len = it.end - it.begin;
  const float* q0 = p.q + static_cast<int64_t>(it.token) * p.q_stride +
                    static_cast<int64_t>(it.kv_head) * group * d;
  const __m256 scale = _mm256_set1_ps(p.scale);
  for (int32_t i0 = 0; i0 < len; i0 += 8) {
    const int32_t n = std::min(8, len - i0);
    const float* rows[8];
    for (int r = 0; r < 8; ++r) rows[r] = p.kv.k_cache + offsets[i0 + (r < n ? r : 0)];
    for (int32_t g = 0; g < group; ++g) {
      const float* q = q0 + g * d;
      __m256 acc[8];
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
      for (int32_t j = 0; j < d; j += 8) {
        const __m256 qv = _mm256_loadu_ps(q + j);
        for (int r = 0; r < 8; ++r)
          acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(rows[r] + j), acc[r]);
      }
      float sums[8];
      _mm256_storeu_ps(sums, _mm256_mul_ps(Sum8x8(acc), scale));
      std::copy(sums, sums + n, scores + g * len + i0);
    }
  }
}

LOOM_DECODE_AVX2 inline float MaxOf(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

LOOM_DECODE_AVX2 inline float SumOf(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// One head's scores to exp(score - max) in place, with the max and the sum.
LOOM_DECODE_AVX2 void Softmax(int32_t len, float* s, float& max_out, float& sum_out) {
  const float lowest = -std::numeric_limits<float>::infinity();
  __m256 mv = _mm256_set1_ps(lowest);
  int32_t i = 0;
  for (; i + 8 <= len; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + i));
  float m = MaxOf(mv);
  for (int32_t t = i; t < len; ++t) m = std::max(m, s[t]);
  const __m256 mb = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  for (i = 0; i + 8 <= len; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mb));
    _mm256_storeu_ps(s + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = SumOf(sv);
  if (i < len) {
    float tail[8] = {lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest};
    std::copy(s + i, s + len, tail);
    float e[8];
    _mm256_storeu_ps(e, Exp8(_mm256_sub_ps(_mm256_loadu_ps(tail), mb)));
    for (int32_t t = i; t < len; ++t) sum += (s[t] = e[t - i]);
  }
  max_out = m;
  sum_out = sum;
}

// acc[g][8 j ...] = sum over positions i of w[g * len + i] * v_i[dim + 8 j ...]
// for G heads and NV vectors of dimensions, held in registers: the loops over
// g and j are unrolled by pragma, without which GCC keeps sum as a stack array
// and stores every sum back after each FMA (as gemm_panels.cc notes).
template <int G, int NV>
LOOM_DECODE_AVX2 void Values(const float* v_cache, const std::vector<size_t>& offsets,
                             const float* w, int32_t len, int32_t dim, float* acc, int32_t d) {
  __m256 sum[G][NV];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) sum[g][j] = _mm256_setzero_ps();
  for (int32_t i = 0; i < len; ++i) {
    const float* v = v_cache + offsets[i] + dim;
    __m256 vv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) vv[j] = _mm256_loadu_ps(v + 8 * j);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m256 wg = _mm256_broadcast_ss(w + g * len + i);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) sum[g][j] = _mm256_fmadd_ps(wg, vv[j], sum[g][j]);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm256_storeu_ps(acc + g * d + dim + 8 * j, sum[g][j]);
}

using ValuesFn = void (*)(const float*, const std::vector<size_t>&, const float*, int32_t, int32_t,
                          float*, int32_t);
constexpr ValuesFn kValues[kHeadsPerPass][kVectorsPerPass] = {
    {Values<1, 1>, Values<1, 2>, Values<1, 3>, Values<1, 4>},
    {Values<2, 1>, Values<2, 2>, Values<2, 3>, Values<2, 4>},
    {Values<3, 1>, Values<3, 2>, Values<3, 3>, Values<3, 4>},
};

}  // namespace

bool VectorDecodeSupported(int32_t head_dim) {
  return DetectedSimd() >= SimdLevel::kAvx2 && head_dim % 8 == 0;
}

void AttendItemVector(const PagedAttentionParams<float>& p, const AttendItem& it, float* scores,
                      float* acc, float* max_out, float* sum_out) {
  const int32_t d = p.kv.head_dim;
  const int32_t group = p.num_heads / p.kv.num_kv_heads;
  const int32_t len = it.end - it.begin;
  thread_local std::vector<size_t> offsets;
  RowOffsets(p.kv, it, offsets);
  Scores(p, it, offsets, scores);
  for (int32_t g = 0; g < group; ++g) Softmax(len, scores + g * len, max_out[g], sum_out[g]);
  for (int32_t g = 0; g < group; g += kHeadsPerPass) {
    const int heads = std::min(kHeadsPerPass, group - g);
    for (int32_t dim = 0; dim < d; dim += 8 * kVectorsPerPass) {
      const int vectors = std::min(kVectorsPerPass, (d - dim) / 8);
      kValues[heads - 1][vectors - 1](p.kv.v_cache, offsets, scores + g * len, len, dim,
                                      acc + g * d, d);
    }
  }
}

}  // namespace loom::kernels::cpu
