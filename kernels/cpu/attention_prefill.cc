#include "kernels/cpu/attention_prefill.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_panels.h"
#include "kernels/cpu/vec_exp.h"

namespace loom::kernels::cpu {
namespace {

#define LOOM_PREFILL_AVX2 __attribute__((target("avx2,fma")))

// Query tokens per tile: with SmolLM2's 3 query heads per kv head, 96 rows of
// Q, O and S (about 54 KiB with K and V's chunk) stay in L1/L2 while the
// context streams by, and a 512-token prompt still makes 48 tiles for the
// threads to share.
constexpr int32_t kTileTokens = 32;
constexpr int kChunk = panels::kWidth;  // context positions per step of a tile

struct QueryTile {
  int32_t seq;
  int32_t kv_head;
  int32_t begin;  // token rows [begin, end) of the step
  int32_t end;
};

// One tile's buffers; rows are token-major: row (t - begin) * group + g.
struct TileScratch {
  std::vector<float> q;        // [rows, dp] scaled queries, zero past head_dim
  std::vector<float> o;        // [rows, dp] unnormalised outputs
  std::vector<float> s;        // [rows, kChunk] scores, then probabilities
  std::vector<float> row_max;  // [rows] running max of the scores
  std::vector<float> row_sum;  // [rows] running sum of exp(score - max)
  std::vector<float> kt;       // [head_dim, kChunk] the chunk's K, transposed
  std::vector<float> v;        // [kChunk, dp] the chunk's V

  void Reset(int32_t rows, int32_t d, int32_t dp) {
    q.assign(static_cast<size_t>(rows) * dp, 0.0f);
    o.assign(q.size(), 0.0f);
    s.assign(static_cast<size_t>(rows) * kChunk, 0.0f);
    row_max.assign(rows, -std::numeric_limits<float>::infinity());
    row_sum.assign(rows, 0.0f);
    kt.assign(static_cast<size_t>(d) * kChunk, 0.0f);
    v.assign(static_cast<size_t>(kChunk) * dp, 0.0f);
  }
};

int32_t PaddedDim(int32_t d) { return (d + kChunk - 1) / kChunk * kChunk; }

void LoadQueries(const PagedAttentionParams<float>& p, const QueryTile& tile, int32_t group,
                 int32_t dp, float* q) {
  const int32_t d = p.kv.head_dim;
  for (int32_t t = tile.begin; t < tile.end; ++t) {
    const float* src =
        p.q + static_cast<int64_t>(t) * p.q_stride + static_cast<int64_t>(tile.kv_head) * group * d;
    for (int32_t g = 0; g < group; ++g) {
      float* dst = q + (static_cast<int64_t>(t - tile.begin) * group + g) * dp;
      for (int32_t j = 0; j < d; ++j) dst[j] = src[g * d + j] * p.scale;
    }
  }
}

// K of positions [p0, p0 + count) transposed into kt (columns past count
// zero), their V into the first count rows of v.
void GatherChunk(const PagedKv<float>& kv, const QueryTile& tile, int32_t p0, int32_t count,
                 int32_t dp, TileScratch& scratch) {
  const int32_t d = kv.head_dim;
  for (int32_t c = 0; c < kChunk; ++c) {
    float* kt = scratch.kt.data() + c;
    if (c >= count) {
      for (int32_t j = 0; j < d; ++j) kt[j * kChunk] = 0.0f;
      continue;
    }
    const size_t offset = kv.PositionOffset(tile.seq, tile.kv_head, p0 + c);
    const float* k = kv.k_cache + offset;
    for (int32_t j = 0; j < d; ++j) kt[j * kChunk] = k[j];
    std::memcpy(scratch.v.data() + static_cast<size_t>(c) * dp, kv.v_cache + offset,
                sizeof(float) * d);
  }
}

LOOM_PREFILL_AVX2 inline float MaxOf(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

LOOM_PREFILL_AVX2 inline float SumOf(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// Online softmax over one chunk of one row: its scores [lo, hi) are real (the
// rest masked: causal past hi, outside the sliding window before lo), at
// least one is. Scores become probabilities relative to the new running max,
// to which the row's sum and output are rescaled.
LOOM_PREFILL_AVX2 void SoftmaxChunkRow(int32_t lo_valid, int32_t hi_valid, int32_t dp, float* s,
                                       float& row_max, float& row_sum, float* o) {
  for (int32_t c = 0; c < lo_valid; ++c) s[c] = -std::numeric_limits<float>::infinity();
  for (int32_t c = hi_valid; c < kChunk; ++c) s[c] = -std::numeric_limits<float>::infinity();
  const __m256 lo = _mm256_loadu_ps(s);
  const __m256 hi = _mm256_loadu_ps(s + 8);
  const float new_max = std::max(row_max, MaxOf(_mm256_max_ps(lo, hi)));
  const __m256 m = _mm256_set1_ps(new_max);
  const __m256 e_lo = Exp8(_mm256_sub_ps(lo, m));
  const __m256 e_hi = Exp8(_mm256_sub_ps(hi, m));
  _mm256_storeu_ps(s, e_lo);
  _mm256_storeu_ps(s + 8, e_hi);
  const float sum = SumOf(_mm256_add_ps(e_lo, e_hi));
  if (new_max != row_max) {
    const float alpha = std::exp(row_max - new_max);
    row_sum *= alpha;
    const __m256 a = _mm256_set1_ps(alpha);
    for (int32_t j = 0; j < dp; j += 8)
      _mm256_storeu_ps(o + j, _mm256_mul_ps(a, _mm256_loadu_ps(o + j)));
  }
  row_sum += sum;
  row_max = new_max;
}

// Positions [p0, p0 + count) for the tile's rows [first_row, end_row): the
// rows of tokens at position p0 or later whose window starts in the chunk or
// before it.
void AttendChunk(const PagedAttentionParams<float>& p, const QueryTile& tile, int32_t group,
                 int32_t dp, int32_t p0, int32_t count, int32_t first_row, int32_t end_row,
                 TileScratch& scratch) {
  const int32_t d = p.kv.head_dim;
  const int32_t active = end_row - first_row;
  GatherChunk(p.kv, tile, p0, count, dp, scratch);
  float* s = scratch.s.data() + static_cast<int64_t>(first_row) * kChunk;
  panels::Gemm({.a = scratch.q.data() + static_cast<int64_t>(first_row) * dp,
                .lda = dp,
                .b = scratch.kt.data(),
                .c = s,
                .ldc = kChunk,
                .m = active,
                .k = d});
  for (int32_t r = first_row; r < end_row; ++r) {
    const int32_t position = p.kv.positions[tile.begin + r / group];
    const int32_t lo_valid = std::max(0, p.kv.WindowStart(position) - p0);
    const int32_t hi_valid = std::min(count, position - p0 + 1);
    SoftmaxChunkRow(lo_valid, hi_valid, dp, scratch.s.data() + static_cast<int64_t>(r) * kChunk,
                    scratch.row_max[r], scratch.row_sum[r],
                    scratch.o.data() + static_cast<int64_t>(r) * dp);
  }
  for (int32_t col = 0; col < dp; col += kChunk) {
    panels::Gemm({.a = s,
                  .lda = kChunk,
                  .b = scratch.v.data() + col,
                  .ldb = dp,
                  .c = scratch.o.data() + static_cast<int64_t>(first_row) * dp + col,
                  .ldc = dp,
                  .m = active,
                  .k = count,
                  .accumulate = true});
  }
}

void AttendTile(const PagedAttentionParams<float>& p, const QueryTile& tile, TileScratch& scratch) {
  const int32_t d = p.kv.head_dim;
  const int32_t dp = PaddedDim(d);
  const int32_t group = p.num_heads / p.kv.num_kv_heads;
  const int32_t rows = (tile.end - tile.begin) * group;
  scratch.Reset(rows, d, dp);
  LoadQueries(p, tile, group, dp, scratch.q.data());
  const int32_t context = p.kv.positions[tile.end - 1] + 1;
  // Window starts grow with the position, so the rows a chunk serves are
  // one contiguous run that moves forward.
  int32_t first_token = tile.begin, end_token = tile.begin;
  for (int32_t p0 = p.kv.WindowStart(p.kv.positions[tile.begin]); p0 < context; p0 += kChunk) {
    const int32_t count = std::min(kChunk, context - p0);
    while (p.kv.positions[first_token] < p0) ++first_token;
    while (end_token < tile.end && p.kv.WindowStart(p.kv.positions[end_token]) < p0 + count) {
      ++end_token;
    }
    AttendChunk(p, tile, group, dp, p0, count, (first_token - tile.begin) * group,
                (end_token - tile.begin) * group, scratch);
  }
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t t = tile.begin + r / group;
    const int32_t h = tile.kv_head * group + r % group;
    float* out = p.out + static_cast<int64_t>(t) * p.out_stride + static_cast<int64_t>(h) * d;
    const float* o = scratch.o.data() + static_cast<int64_t>(r) * dp;
    const float inv = 1.0f / scratch.row_sum[r];
    for (int32_t j = 0; j < d; ++j) out[j] = o[j] * inv;
  }
}

std::vector<QueryTile> TilesOf(const PagedKv<float>& kv) {
  std::vector<QueryTile> tiles;
  for (int32_t s = 0; s < kv.num_seqs; ++s) {
    if (!IsTiledPrefill(kv, s)) continue;
    const int32_t begin = kv.query_start[s], end = kv.query_start[s + 1];
    for (int32_t t = begin + 1; t < end; ++t) {
      LOOM_CHECK_EQ(kv.positions[t], kv.positions[t - 1] + 1) << "seq " << s << " token " << t;
    }
    for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
      for (int32_t t = begin; t < end; t += kTileTokens) {
        tiles.push_back({s, h, t, std::min(end, t + kTileTokens)});
      }
    }
  }
  // Longest contexts first, so that the threads end together.
  std::stable_sort(tiles.begin(), tiles.end(), [&](const QueryTile& a, const QueryTile& b) {
    return kv.positions[a.end - 1] > kv.positions[b.end - 1];
  });
  return tiles;
}

}  // namespace

bool IsTiledPrefill(const PagedKv<float>& kv, int32_t s) {
  return panels::Supported(DetectedSimd()) && kv.query_start[s + 1] - kv.query_start[s] > 1;
}

void PrefillAttention(const PagedAttentionParams<float>& p, ParallelFor& pool) {
  const std::vector<QueryTile> tiles = TilesOf(p.kv);
  pool.Run(static_cast<int64_t>(tiles.size()), 1, [&](int64_t begin, int64_t end) {
    thread_local TileScratch scratch;
    for (int64_t i = begin; i < end; ++i) AttendTile(p, tiles[i], scratch);
  });
}

}  // namespace loom::kernels::cpu
