#include "kernels/cpu/matmul_quant_int16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/dequant_blocks.h"
#include "kernels/cpu/matmul_quant_blocks.h"

// GCC 12 warns inside the AVX-512 intrinsics built on _mm512_undefined_*
// (as in matmul_quant.cc); the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace loom::kernels::cpu::int16 {
namespace {

#define LOOM_INT16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int kPairs = kQuantBlock / 2;  // int16 pairs per block of 32
constexpr int kNr = 8;                   // rows of W per tile
constexpr int kChunkTiles = 16;          // tiles of x per pass over a task's W

// Q6_K's integers reach 128 * 32 (its sub-block scales folded in): x keeps
// 15 bits there so that 32 products stay below 2^31. 16 bits elsewhere.
constexpr int32_t XMax(QuantType t) { return t == QuantType::kQ6_K ? 16383 : 32767; }

// x rounded per block of 32, `lanes` rows a tile, row r of a tile in lane r
// (lanes past the last row zero).
struct Activations {
  int lanes = 16;
  int tiles = 0;
  int blocks = 0;
  std::vector<int32_t> pairs;  // [tiles, k / 2, lanes]: values 2p, 2p + 1 of the row
  std::vector<float> scale;    // [tiles, blocks, lanes]
  std::vector<float> sum;      // [tiles, blocks, lanes]: the block's sum of x
};

// Block b of one row of x: its 32 values rounded to int16 on the scale
// max |x| / xmax, as pairs at pairs[p * lanes] (p < kPairs); the scale and
// the block's sum.
LOOM_INT16 inline void QuantizeBlock(const float* x, int32_t xmax, int lanes, int32_t* pairs,
                                     float& scale, float& sum) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const __m512 inv = _mm512_set1_ps(max > 0.0f ? static_cast<float>(xmax) / max : 0.0f);
  alignas(64) int32_t q[kPairs];
  _mm512_store_si512(
      q, _mm512_inserti64x4(_mm512_castsi256_si512(
                                _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)))),
                            _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv))), 1));
  for (int p = 0; p < kPairs; ++p) pairs[p * lanes] = q[p];
  scale = max / static_cast<float>(xmax);
  sum = _mm512_reduce_add_ps(_mm512_add_ps(v0, v1));
}

// One task quantizes a block of every row of a tile: the block's pairs are
// one contiguous run of the tile, written by one thread (rows split over
// threads would share its cache lines).
void Quantize(const MatmulQuantParams& p, ParallelFor& pool, Activations& a) {
  a.lanes = p.m <= 8 ? 8 : 16;
  a.tiles = (p.m + a.lanes - 1) / a.lanes;
  a.blocks = p.k / kQuantBlock;
  const size_t per_tile = static_cast<size_t>(a.lanes) * a.blocks;
  a.pairs.resize(static_cast<size_t>(a.tiles) * per_tile * kPairs);
  a.scale.resize(static_cast<size_t>(a.tiles) * per_tile);
  a.sum.resize(a.scale.size());
  const int32_t xmax = XMax(p.type);
  pool.Run(int64_t{a.tiles} * a.blocks, 4, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t tile = u / a.blocks, b = u % a.blocks;
      const size_t at = tile * per_tile + static_cast<size_t>(b) * a.lanes;
      int32_t* pairs = a.pairs.data() + at * kPairs;
      for (int lane = 0; lane < a.lanes; ++lane) {
        const int64_t i = tile * a.lanes + lane;
        if (i >= p.m) {  // past the last row: zero
          for (int q = 0; q < kPairs; ++q) pairs[q * a.lanes + lane] = 0;
          a.scale[at + lane] = a.sum[at + lane] = 0.0f;
          continue;
        }
        QuantizeBlock(p.x + i * p.ldx + b * kQuantBlock, xmax, a.lanes, pairs + lane,
                      a.scale[at + lane], a.sum[at + lane]);
      }
    }
  });
}

// kNr rows of W decoded: w = d[b] * v + m[b] per block b of 32. Block-major,
// so that a tile reads a block's values at fixed offsets from one pointer.
struct Panel {
  std::vector<int16_t> v;  // [blocks, kNr, 32]
  std::vector<float> d;    // [blocks, kNr]
  std::vector<float> m;    // [blocks, kNr]
  // The fp16 scales and offsets of 32-value blocks, widened to d and m
  // eight at a time once the panel is decoded.
  std::vector<uint16_t> dh, mh;
};

constexpr bool HasMin(QuantType t) {
  return t == QuantType::kQ4_1 || t == QuantType::kQ5_1 || t == QuantType::kQ4_K ||
         t == QuantType::kQ5_K;
}

constexpr bool IsKQuant(QuantType t) {
  return t == QuantType::kQ4_K || t == QuantType::kQ5_K || t == QuantType::kQ6_K;
}

// The fp16 field at byte `offset` of a block, widened.
LOOM_INT16 inline float Half(const std::byte* block, size_t offset) {
  uint16_t h;
  std::memcpy(&h, block + offset, sizeof(h));
  return _cvtsh_ss(h);
}

// The 32 low then high nibbles of 16 bytes.
LOOM_INT16 inline __m256i Nibbles(const std::byte* qs) {
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low), _mm_and_si128(q, low));
}

// 32 bytes 0..15 (or 0..31) to int16, minus bias.
LOOM_INT16 inline void Widen(__m256i bytes, int16_t bias, int16_t* out) {
  _mm512_storeu_si512(out, _mm512_sub_epi16(_mm512_cvtepu8_epi16(bytes), _mm512_set1_epi16(bias)));
}

// Block b (of 32 values) of a row of W: its integers, scale and offset.
template <QuantType T>
LOOM_INT16 inline void DecodeBlock(const std::byte* row, int b, int16_t* v, Panel& panel,
                                   size_t at) {
  float& d = panel.d[at];
  float& m = panel.m[at];
  if constexpr (T == QuantType::kQ8_0) {
    const std::byte* blk = row + b * sizeof(BlockQ8_0);
    std::memcpy(&panel.dh[at], blk + offsetof(BlockQ8_0, d), sizeof(uint16_t));
    _mm512_storeu_si512(v, _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                               reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_0, qs)))));
  } else if constexpr (T == QuantType::kQ4_0 || T == QuantType::kQ4_1) {
    using B = std::conditional_t<T == QuantType::kQ4_0, BlockQ4_0, BlockQ4_1>;
    const std::byte* blk = row + b * sizeof(B);
    std::memcpy(&panel.dh[at], blk + offsetof(B, d), sizeof(uint16_t));
    if constexpr (T == QuantType::kQ4_1) {
      std::memcpy(&panel.mh[at], blk + offsetof(BlockQ4_1, m), sizeof(uint16_t));
    }
    Widen(Nibbles(blk + offsetof(B, qs)), T == QuantType::kQ4_0 ? 8 : 0, v);
  } else if constexpr (T == QuantType::kQ5_0 || T == QuantType::kQ5_1) {
    using B = std::conditional_t<T == QuantType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    const std::byte* blk = row + b * sizeof(B);
    std::memcpy(&panel.dh[at], blk + offsetof(B, d), sizeof(uint16_t));
    if constexpr (T == QuantType::kQ5_1) {
      std::memcpy(&panel.mh[at], blk + offsetof(BlockQ5_1, m), sizeof(uint16_t));
    }
    uint32_t qh;
    std::memcpy(&qh, blk + offsetof(B, qh), sizeof(qh));
    const __m256i low = Nibbles(blk + offsetof(B, qs));
    Widen(_mm256_mask_add_epi8(low, qh, low, _mm256_set1_epi8(0x10)),
          T == QuantType::kQ5_0 ? 16 : 0, v);
  } else if constexpr (T == QuantType::kQ4_K || T == QuantType::kQ5_K) {
    using B = std::conditional_t<T == QuantType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const std::byte* blk = row + (b / 8) * sizeof(B);
    const int s = b % 8;
    int sc, mn;
    ScaleMinK4(s, reinterpret_cast<const uint8_t*>(blk + offsetof(B, scales)), sc, mn);
    d = Half(blk, offsetof(B, d)) * static_cast<float>(sc);
    m = -(Half(blk, offsetof(B, dmin)) * static_cast<float>(mn));
    const __m256i q =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(B, qs) + 32 * (s / 2)));
    __m256i bytes = _mm256_and_si256(_mm256_srli_epi16(q, 4 * (s % 2)), _mm256_set1_epi8(0x0f));
    if constexpr (T == QuantType::kQ5_K) {
      const __mmask32 high = _mm256_test_epi8_mask(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(B, qh))),
          _mm256_set1_epi8(static_cast<char>(1 << s)));
      bytes = _mm256_mask_add_epi8(bytes, high, bytes, _mm256_set1_epi8(0x10));
    }
    Widen(bytes, 0, v);
  } else {
    static_assert(T == QuantType::kQ6_K);
    const std::byte* blk = row + (b / 8) * sizeof(BlockQ6_K);
    const int s = b % 8, half = s / 4, quarter = s % 4;
    d = Half(blk, offsetof(BlockQ6_K, d));
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        blk + offsetof(BlockQ6_K, ql) + 64 * half + 32 * (quarter % 2)));
    const __m256i qh = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ6_K, qh) + 32 * half));
    const __m256i three = _mm256_set1_epi8(3);
    const __m256i low =
        _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (quarter / 2)), _mm256_set1_epi8(0x0f));
    const __m256i high =
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * quarter), three), 4);
    const auto* sc =
        reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales)) + 8 * half + 2 * quarter;
    const __m512i scales =
        _mm512_inserti64x4(_mm512_set1_epi16(sc[0]), _mm256_set1_epi16(sc[1]), 1);
    const __m512i q =
        _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_or_si256(low, high)), _mm512_set1_epi16(32));
    _mm512_storeu_si512(v, _mm512_mullo_epi16(q, scales));
  }
}

// Sizes the panel for k values a row.
void PreparePanel(int k, Panel& panel) {
  const size_t count = static_cast<size_t>(k / kQuantBlock) * kNr;
  panel.v.resize(count * kQuantBlock);
  panel.d.resize(count);
  panel.m.resize(count);
  panel.dh.resize(count);
  panel.mh.resize(count);
}

// kNr = 8 fp16 values to float32.
LOOM_INT16 inline void WidenHalves(const uint16_t* h, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
}

// Block b of rows [0, rows) of W into the panel (its other rows zero).
template <QuantType T>
LOOM_INT16 inline void DecodePanelBlock(const std::byte* w, int64_t row_bytes, int rows, int b,
                                        Panel& panel) {
  const size_t first = static_cast<size_t>(b) * kNr;
  for (int r = 0; r < kNr; ++r) {
    const size_t at = first + r;
    int16_t* v = panel.v.data() + at * kQuantBlock;
    if (r < rows) {
      DecodeBlock<T>(w + r * row_bytes, b, v, panel, at);
      continue;
    }
    std::fill_n(v, kQuantBlock, int16_t{0});
    panel.d[at] = panel.m[at] = 0.0f;
    panel.dh[at] = panel.mh[at] = 0;
  }
  if constexpr (!IsKQuant(T)) {
    WidenHalves(panel.dh.data() + first, panel.d.data() + first);
    if constexpr (HasMin(T)) WidenHalves(panel.mh.data() + first, panel.m.data() + first);
  }
}

// The vector operations of a tile of 16 or 8 lanes.
struct Lanes16 {
  static constexpr int kLanes = 16;
  using I = __m512i;
  using F = __m512;
  LOOM_INT16 static I Load(const int32_t* p) { return _mm512_loadu_si512(p); }
  LOOM_INT16 static I Pair(const int16_t* w) {
    int32_t v;
    std::memcpy(&v, w, sizeof(v));
    return _mm512_set1_epi32(v);
  }
  LOOM_INT16 static I Madd(I x, I w) { return _mm512_madd_epi16(x, w); }
  LOOM_INT16 static I Dot(I acc, I x, I w) { return _mm512_dpwssd_epi32(acc, x, w); }
  LOOM_INT16 static F LoadF(const float* p) { return _mm512_loadu_ps(p); }
  LOOM_INT16 static F Set(float v) { return _mm512_set1_ps(v); }
  LOOM_INT16 static F Zero() { return _mm512_setzero_ps(); }
  LOOM_INT16 static F Scaled(I acc, F s) { return _mm512_mul_ps(_mm512_cvtepi32_ps(acc), s); }
  LOOM_INT16 static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  LOOM_INT16 static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
};

struct Lanes8 {
  static constexpr int kLanes = 8;
  using I = __m256i;
  using F = __m256;
  LOOM_INT16 static I Load(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  LOOM_INT16 static I Pair(const int16_t* w) {
    int32_t v;
    std::memcpy(&v, w, sizeof(v));
    return _mm256_set1_epi32(v);
  }
  LOOM_INT16 static I Madd(I x, I w) { return _mm256_madd_epi16(x, w); }
  LOOM_INT16 static I Dot(I acc, I x, I w) { return _mm256_dpwssd_epi32(acc, x, w); }
  LOOM_INT16 static F LoadF(const float* p) { return _mm256_loadu_ps(p); }
  LOOM_INT16 static F Set(float v) { return _mm256_set1_ps(v); }
  LOOM_INT16 static F Zero() { return _mm256_setzero_ps(); }
  LOOM_INT16 static F Scaled(I acc, F s) { return _mm256_mul_ps(_mm256_cvtepi32_ps(acc), s); }
  LOOM_INT16 static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  LOOM_INT16 static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
};

// Bytes of W to read ahead while a tile runs: the next panel's rows, a few
// cache lines a block (the products are bound by the integer units, the
// panel's decoding by the latency of W's first read).
struct ReadAhead {
  const std::byte* begin = nullptr;
  int64_t bytes = 0;
};

// W's rows for a tile that decodes its panel as it goes (the first tile of
// a panel), else null.
struct PanelSource {
  const std::byte* w = nullptr;
  int64_t row_bytes = 0;
  int rows = 0;
};

// One tile: the lanes' rows of x (from row i) by the panel's kNr rows of W.
template <typename V, QuantType T>
LOOM_INT16 void Tile(const Activations& a, int tile, Panel& panel, float* y, int64_t ldy, int rows,
                     int columns, const float* bias, ReadAhead ahead, PanelSource source) {
  constexpr int64_t kLine = 64;
  const int64_t lines_per_block = (ahead.bytes / kLine + a.blocks) / a.blocks;
  constexpr int L = V::kLanes;
  const size_t per_tile = static_cast<size_t>(L) * a.blocks;
  const int32_t* xp = a.pairs.data() + tile * per_tile * kPairs;
  const float* xs = a.scale.data() + tile * per_tile;
  const float* xsum = a.sum.data() + tile * per_tile;
  typename V::F acc[kNr];
  for (int j = 0; j < kNr; ++j) acc[j] = V::Zero();
  for (int b = 0; b < a.blocks; ++b) {
    for (int64_t l = b * lines_per_block; l < (b + 1) * lines_per_block; ++l) {
      if (l * kLine < ahead.bytes) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead.begin + l * kLine), _MM_HINT_T0);
      }
    }
    if (source.w != nullptr) DecodePanelBlock<T>(source.w, source.row_bytes, source.rows, b, panel);
    const int32_t* xb = xp + static_cast<size_t>(b) * kPairs * L;
    const int16_t* wb = panel.v.data() + static_cast<size_t>(b) * kNr * kQuantBlock;
    typename V::I dot[kNr];
    {
      const typename V::I x = V::Load(xb);
#pragma GCC unroll 8
      for (int j = 0; j < kNr; ++j) dot[j] = V::Madd(x, V::Pair(wb + j * kQuantBlock));
    }
#pragma GCC unroll 16
    for (int p = 1; p < kPairs; ++p) {
      const typename V::I x = V::Load(xb + p * L);
#pragma GCC unroll 8
      for (int j = 0; j < kNr; ++j) {
        dot[j] = V::Dot(dot[j], x, V::Pair(wb + j * kQuantBlock + 2 * p));
      }
    }
    const typename V::F s = V::LoadF(xs + b * L);
#pragma GCC unroll 8
    for (int j = 0; j < kNr; ++j) {
      acc[j] = V::Fma(V::Scaled(dot[j], s), V::Set(panel.d[b * kNr + j]), acc[j]);
    }
    if constexpr (HasMin(T)) {
      const typename V::F sum = V::LoadF(xsum + b * L);
#pragma GCC unroll 8
      for (int j = 0; j < kNr; ++j) acc[j] = V::Fma(sum, V::Set(panel.m[b * kNr + j]), acc[j]);
    }
  }
  alignas(64) float out[kNr][L];
  for (int j = 0; j < kNr; ++j) V::Store(out[j], acc[j]);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < columns; ++j) {
      y[r * ldy + j] = out[j][r] + (bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

template <QuantType T>
void Run(const MatmulQuantParams& p, const Activations& a, ParallelFor& pool,
         int64_t rows_per_task) {
  const int64_t row_bytes = static_cast<int64_t>(p.k) / QuantBlockValues(T) * QuantBlockBytes(T);
  const int64_t task_rows = (rows_per_task + kNr - 1) / kNr * kNr;
  const auto tile = a.lanes == 16 ? Tile<Lanes16, T> : Tile<Lanes8, T>;
  pool.Run(p.n, task_rows, [&](int64_t n_begin, int64_t n_end) {
    thread_local Panel panel;
    PreparePanel(p.k, panel);
    for (int t0 = 0; t0 < a.tiles; t0 += kChunkTiles) {
      for (int64_t j = n_begin; j < n_end; j += kNr) {
        const int columns = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
        // The first tile decodes the panel block by block as it multiplies.
        const PanelSource source{static_cast<const std::byte*>(p.w) + j * row_bytes, row_bytes,
                                 columns};
        // The next panel's rows in this task, read ahead during the first tile.
        const int64_t next = std::min<int64_t>(kNr, std::max<int64_t>(0, n_end - j - kNr));
        const ReadAhead ahead{static_cast<const std::byte*>(p.w) + (j + kNr) * row_bytes,
                              next * row_bytes};
        for (int t = t0; t < std::min(a.tiles, t0 + kChunkTiles); ++t) {
          const int64_t i = static_cast<int64_t>(t) * a.lanes;
          const int rows = static_cast<int>(std::min<int64_t>(a.lanes, p.m - i));
          tile(a, t, panel, p.y + i * p.ldy + j, p.ldy, rows, columns,
               p.bias != nullptr ? p.bias + j : nullptr, t == t0 ? ahead : ReadAhead{},
               t == t0 ? source : PanelSource{});
        }
      }
    }
  });
}

}  // namespace

bool Supported(QuantType type, SimdLevel level) {
  return level == SimdLevel::kAvx512 && HasAvx512Vnni() && type != QuantType::kQ2_K &&
         type != QuantType::kQ3_K;
}

void MatmulInt16(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task) {
  LOOM_CHECK(Supported(p.type, SimdLevel::kAvx512));
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  thread_local Activations a;
  Quantize(p, pool, a);
  switch (p.type) {
    case QuantType::kQ8_0:
      return Run<QuantType::kQ8_0>(p, a, pool, rows_per_task);
    case QuantType::kQ4_0:
      return Run<QuantType::kQ4_0>(p, a, pool, rows_per_task);
    case QuantType::kQ4_1:
      return Run<QuantType::kQ4_1>(p, a, pool, rows_per_task);
    case QuantType::kQ5_0:
      return Run<QuantType::kQ5_0>(p, a, pool, rows_per_task);
    case QuantType::kQ5_1:
      return Run<QuantType::kQ5_1>(p, a, pool, rows_per_task);
    case QuantType::kQ4_K:
      return Run<QuantType::kQ4_K>(p, a, pool, rows_per_task);
    case QuantType::kQ5_K:
      return Run<QuantType::kQ5_K>(p, a, pool, rows_per_task);
    case QuantType::kQ6_K:
      return Run<QuantType::kQ6_K>(p, a, pool, rows_per_task);
    default:
      LOOM_CHECK(false) << "no int16 path for " << QuantTypeName(p.type);
  }
}

}  // namespace loom::kernels::cpu::int16

#pragma GCC diagnostic pop
