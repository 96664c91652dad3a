// The register-tiled y = x W^T shared by every weight format of the CPU
// matmul (float32, bfloat16, ggml blocks). A tile of up to 4 rows of x by 4
// rows of W accumulates 16 vector partial sums over k; a format supplies only
// a policy that turns a step of one row of W into float32 vectors. The loop,
// the accumulation order, the horizontal sums, the bias and the split of W's
// rows over threads live here once, so every format gives each output the
// bits float32 weights would, whatever the number of rows of x.
//
// A policy P provides:
//   using W                       element type of W (rows ldw elements apart)
//   kScalarStep                   values LoadScalar decodes at once
//   LoadScalar(row, kk, out)      values [kk, kk + kScalarStep) of a row
//   kAvx2Vectors / kAvx512Vectors vectors of 8 / 16 floats per step
//   LoadAvx2(row, s, v) / LoadAvx512(row, s, v)   step s of a row into v
//   kHasTail                      k may not be a whole number of steps; then
//     Value(row, r) and LoadMaskedAvx512(row, kk, mask) finish the row
//   Prefetch<NR>(tile, s)         called once per step (may do nothing)
// Each format instantiates these templates in its own file, with a policy in
// an unnamed namespace, so its floating-point compile options still apply.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_panels.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd_reduce.h"
#include "kernels/parallel.h"

// The SIMD levels of the tiles: the union of what the formats' loaders need
// (F16C for block scales, AVX-512 BW/VL for bfloat16 widening), so that the
// loaders inline. The float32 tiles use none of the extra instructions.
#define LOOM_TILES_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LOOM_TILES_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

namespace loom::kernels::cpu::tiles {

inline constexpr int kMr = 4;  // rows of x per tile
inline constexpr int kNr = 4;  // rows of W per tile
// Rows of x per wide tile: where a format decodes W in registers (4 vectors a
// step), AVX2 decodes each step of W once for 8 rows of x instead of 4, one
// row of W at a time (8 sums and a step of W fit AVX2's 16 registers).
inline constexpr int kMrWide = 8;

// One product (or a range of W's rows of it) in a format's element type.
template <class W>
struct Operands {
  const float* x;  // [m, k], row stride ldx
  const W* w;      // [n] rows of ldw elements
  int64_t ldw;
  const float* bias;  // [n] or null
  float* y;           // [m, n], row stride ldy
  int32_t m;
  int32_t n;
  int32_t k;
  int32_t ldx;
  int32_t ldy;
};

template <class W>
struct Tile {
  const float* x;
  int ldx;
  const W* w;  // the tile's first row of W
  int64_t ldw;
  int k;
  const float* bias;
  float* y;
  int ldy;

  const float* XRow(int i) const { return x + static_cast<int64_t>(i) * ldx; }
  const W* WRow(int j) const { return w + j * ldw; }
  void Store(int i, int j, float sum) const {
    y[static_cast<int64_t>(i) * ldy + j] = sum + (bias ? bias[j] : 0.0f);
  }
};

template <class P, int MR, int NR>
void TileScalar(const Tile<typename P::W>& t) {
  float w[P::kScalarStep];
  for (int i = 0; i < MR; ++i) {
    const float* x = t.XRow(i);
    for (int j = 0; j < NR; ++j) {
      float acc = 0.0f;
      for (int kk = 0; kk < t.k; kk += P::kScalarStep) {
        P::LoadScalar(t.WRow(j), kk, w);
        for (int l = 0; l < P::kScalarStep; ++l) acc += x[kk + l] * w[l];
      }
      t.Store(i, j, acc);
    }
  }
}

LOOM_TILES_AVX2 inline float Sum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

template <class P, int MR, int NR>
LOOM_TILES_AVX2 void TileAvx2(const Tile<typename P::W>& t) {
  constexpr int kVectors = P::kAvx2Vectors;
  constexpr int kStep = 8 * kVectors;
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int steps = t.k / kStep;
  for (int s = 0; s < steps; ++s) {
    const int kk = s * kStep;
    P::template Prefetch<NR>(t, s);
    for (int j = 0; j < NR; ++j) {
      __m256 w[kVectors];
      P::LoadAvx2(t.WRow(j), s, w);
      for (int i = 0; i < MR; ++i) {
        for (int g = 0; g < kVectors; ++g) {
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(t.XRow(i) + kk + 8 * g), w[g], acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = Sum256(acc[i][j]);
      if constexpr (P::kHasTail) {
        for (int r = steps * kStep; r < t.k; ++r) sum += t.XRow(i)[r] * P::Value(t.WRow(j), r);
      }
      t.Store(i, j, sum);
    }
  }
}

// Steps of k a wide tile runs for its rows of W before moving on, where k is
// long: kMrWide rows of x over 16 steps of 32 values are 16 KiB, which stay in
// L1 while each row of W passes over them (a down projection's whole rows of
// x, 8 x 1536 floats, would be read from L2 once per row of W).
inline constexpr int kWideChunkSteps = 16;

// kMrWide rows of x by NR rows of W, a row of W at a time; each output
// accumulates the products of TileAvx2 in the same order, so the same bits.
// A long k runs in chunks of about kWideChunkSteps steps, every row of W
// through a chunk before the next; the partial sums wait in `saved` between
// chunks, which changes no arithmetic.
template <class P, int NR>
LOOM_TILES_AVX2 void TileAvx2Wide(const Tile<typename P::W>& t) {
  constexpr int kVectors = P::kAvx2Vectors;
  constexpr int kStep = 8 * kVectors;
  static_assert(!P::kHasTail);
  const int steps = t.k / kStep;
  const int chunks =
      steps > kWideChunkSteps * 3 / 2 ? (steps + kWideChunkSteps - 1) / kWideChunkSteps : 1;
  const int chunk_steps = (steps + chunks - 1) / chunks;
  __m256 saved[NR][kMrWide];
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < kMrWide; ++i) saved[j][i] = _mm256_setzero_ps();
  for (int s0 = 0; s0 < steps; s0 += chunk_steps) {
    const int s1 = std::min(steps, s0 + chunk_steps);
    for (int j = 0; j < NR; ++j) {
      __m256 acc[kMrWide];
      for (int i = 0; i < kMrWide; ++i) acc[i] = saved[j][i];
      for (int s = s0; s < s1; ++s) {
        const int kk = s * kStep;
        if (j == 0) P::template Prefetch<NR>(t, s);
        __m256 w[kVectors];
        P::LoadAvx2(t.WRow(j), s, w);
        for (int i = 0; i < kMrWide; ++i) {
          for (int g = 0; g < kVectors; ++g) {
            acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(t.XRow(i) + kk + 8 * g), w[g], acc[i]);
          }
        }
      }
      if (s1 == steps) {
        for (int i = 0; i < kMrWide; ++i) t.Store(i, j, Sum256(acc[i]));
      } else {
        for (int i = 0; i < kMrWide; ++i) saved[j][i] = acc[i];
      }
    }
  }
}

template <class P, int MR, int NR>
LOOM_TILES_AVX512 void TileAvx512(const Tile<typename P::W>& t) {
  constexpr int kVectors = P::kAvx512Vectors;
  constexpr int kStep = 16 * kVectors;
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const int steps = t.k / kStep;
  for (int s = 0; s < steps; ++s) {
    const int kk = s * kStep;
    P::template Prefetch<NR>(t, s);
    __m512 xv[MR][kVectors];
    for (int i = 0; i < MR; ++i)
      for (int g = 0; g < kVectors; ++g) xv[i][g] = _mm512_loadu_ps(t.XRow(i) + kk + 16 * g);
    for (int j = 0; j < NR; ++j) {
      __m512 w[kVectors];
      P::LoadAvx512(t.WRow(j), s, w);
      for (int g = 0; g < kVectors; ++g)
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i][g], w[g], acc[i][j]);
    }
  }
  if constexpr (P::kHasTail) {
    const int kk = steps * kStep;
    if (kk < t.k) {
      const __mmask16 mask = static_cast<__mmask16>((1u << (t.k - kk)) - 1u);
      __m512 xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, t.XRow(i) + kk);
      for (int j = 0; j < NR; ++j) {
        const __m512 wv = P::LoadMaskedAvx512(t.WRow(j), kk, mask);
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
      }
    }
  }
  float sums[16];
  TileSums<MR, NR>(acc, sums);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) t.Store(i, j, sums[4 * i + j]);
}

template <class W>
using TileFn = void (*)(const Tile<W>&);

// fn[mr - 1][nr - 1]: the tile kernel of one SIMD level for an mr x nr tile;
// wide[nr - 1]: kMrWide x nr, or null where the level has none.
template <class W>
struct TileTable {
  TileFn<W> fn[kMr][kNr];
  TileFn<W> wide[kNr];
};

template <class P, template <class, int, int> class K>
inline constexpr TileTable<typename P::W> kTable = {
    {{K<P, 1, 1>::Run, K<P, 1, 2>::Run, K<P, 1, 3>::Run, K<P, 1, 4>::Run},
     {K<P, 2, 1>::Run, K<P, 2, 2>::Run, K<P, 2, 3>::Run, K<P, 2, 4>::Run},
     {K<P, 3, 1>::Run, K<P, 3, 2>::Run, K<P, 3, 3>::Run, K<P, 3, 4>::Run},
     {K<P, 4, 1>::Run, K<P, 4, 2>::Run, K<P, 4, 3>::Run, K<P, 4, 4>::Run}},
    {K<P, kMrWide, 1>::kWide, K<P, kMrWide, 2>::kWide, K<P, kMrWide, 3>::kWide,
     K<P, kMrWide, 4>::kWide}};

template <class P, int MR, int NR>
struct ScalarK {
  static void Run(const Tile<typename P::W>& t) { TileScalar<P, MR, NR>(t); }
  static constexpr TileFn<typename P::W> kWide = nullptr;
};
template <class P, int MR, int NR>
struct Avx2K {
  static void Run(const Tile<typename P::W>& t) { TileAvx2<P, MR, NR>(t); }
  // Only for formats decoded in registers: float32 and bfloat16 rows load in
  // one instruction, and more rows of x would only add loads of x.
  static constexpr TileFn<typename P::W> Wide() {
    if constexpr (P::kAvx2Vectors == 4 && !P::kHasTail) return &TileAvx2Wide<P, NR>;
    return nullptr;
  }
  static constexpr TileFn<typename P::W> kWide = Wide();
};
template <class P, int MR, int NR>
struct Avx512K {
  static void Run(const Tile<typename P::W>& t) { TileAvx512<P, MR, NR>(t); }
  static constexpr TileFn<typename P::W> kWide = nullptr;
};

template <class P>
const TileTable<typename P::W>& TilesFor(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return kTable<P, Avx512K>;
    case SimdLevel::kAvx2:
      return kTable<P, Avx2K>;
    case SimdLevel::kScalar:
      break;
  }
  return kTable<P, ScalarK>;
}

// Rows [n_begin, n_end) of W against every row of x.
template <class W>
void TileRows(const Operands<W>& p, const TileTable<W>& tiles, int64_t n_begin, int64_t n_end) {
  for (int64_t i = 0; i < p.m;) {
    const bool wide = tiles.wide[0] != nullptr && p.m - i >= kMrWide;
    const int mr = wide ? kMrWide : static_cast<int>(std::min<int64_t>(kMr, p.m - i));
    for (int64_t j = n_begin; j < n_end; j += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
      const Tile<W> t{
          p.x + i * p.ldx,     p.ldx, p.w + j * p.ldw, p.ldw, p.k, p.bias ? p.bias + j : nullptr,
          p.y + i * p.ldy + j, p.ldy};
      (wide ? tiles.wide[nr - 1] : tiles.fn[mr - 1][nr - 1])(t);
    }
    i += mr;
  }
}

// The whole product, W's rows split over the pool in tasks of rows_per_task.
template <class W>
void RunTiles(const Operands<W>& p, const TileTable<W>& tiles, ParallelFor& pool,
              int64_t rows_per_task) {
  pool.Run(p.n, rows_per_task,
           [&](int64_t n_begin, int64_t n_end) { TileRows(p, tiles, n_begin, n_end); });
}

// The product by the panel GEMM: tasks of rows_per_task rows of W (rounded up
// to whole panels), each widened a panel at a time by widen(first row, rows,
// out) into a per-thread buffer, packed, and multiplied with every row of x.
template <class W, class Widen>
void RunPanels(const Operands<W>& p, ParallelFor& pool, int64_t rows_per_task, const Widen& widen) {
  constexpr int64_t kWidth = panels::kWidth;
  const int64_t task_rows = (rows_per_task + kWidth - 1) / kWidth * kWidth;
  pool.Run(p.n, task_rows, [&](int64_t n_begin, int64_t n_end) {
    thread_local std::vector<float> rows, panel;
    rows.resize(static_cast<size_t>(kWidth) * p.k);
    panel.resize(rows.size());
    for (int64_t begin = n_begin; begin < n_end; begin += kWidth) {
      const int count = static_cast<int>(std::min(kWidth, n_end - begin));
      widen(p.w + begin * p.ldw, count, rows.data());
      panels::Pack(rows.data(), p.k, count, p.k, panel.data());
      panels::Gemm({.a = p.x,
                    .lda = p.ldx,
                    .b = panel.data(),
                    .ldb = kWidth,
                    .c = p.y + begin,
                    .ldc = p.ldy,
                    .m = p.m,
                    .k = p.k,
                    .columns = count,
                    .bias = p.bias ? p.bias + begin : nullptr});
    }
  });
}

// The product with W widened to float32 first, for many rows of x (where the
// float32 tiles' full FMA rate beats widening in registers once per 4 rows of
// x): tasks of rows_per_task rows of W, each widened slice_rows at a time by
// widen(first row, rows, out) into a per-thread buffer, then multiplied by the
// float32 tiles, or from kPanelMinRows rows of x on by the panel GEMM.
template <class W, class Widen>
void RunWidened(const Operands<W>& p, ParallelFor& pool, SimdLevel level, int64_t rows_per_task,
                int64_t slice_rows, const Widen& widen) {
  if (p.m >= kPanelMinRows && panels::Supported(level)) {
    RunPanels(p, pool, rows_per_task, widen);
    return;
  }
  pool.Run(p.n, rows_per_task, [&](int64_t n_begin, int64_t n_end) {
    thread_local std::vector<float> w_f32;
    w_f32.resize(static_cast<size_t>(std::min(slice_rows, n_end - n_begin)) * p.k);
    for (int64_t begin = n_begin; begin < n_end; begin += slice_rows) {
      const int64_t rows = std::min(slice_rows, n_end - begin);
      // The next slice's rows are read from memory while this one's products
      // run (decode batches stream W from DRAM, and the widening stalled on it).
      const int64_t next_rows = std::min(slice_rows, n_end - begin - rows);
      const char* next = reinterpret_cast<const char*>(p.w + (begin + rows) * p.ldw);
      for (int64_t off = 0; off < next_rows * p.ldw * static_cast<int64_t>(sizeof(W)); off += 64) {
        _mm_prefetch(next + off, _MM_HINT_T1);
      }
      widen(p.w + begin * p.ldw, rows, w_f32.data());
      MatmulSerial({p.x, w_f32.data(), p.bias ? p.bias + begin : nullptr, p.y + begin, p.m,
                    static_cast<int32_t>(rows), p.k, p.ldx, p.ldy},
                   level);
    }
  });
}

}  // namespace loom::kernels::cpu::tiles
