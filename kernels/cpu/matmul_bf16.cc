// Same register tiling and the same float32 accumulation order as matmul.cc
// (4 rows of x by 4 rows of W, lanes summed in order), with W widened from
// bfloat16: every path gives each output the same bits whatever the number of
// rows of x, so a sequence's logits do not depend on the rest of its batch.
#include "kernels/cpu/matmul_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd_reduce.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 4;
constexpr int64_t kRowsPerTask = 16;
// From this many rows of x on, a task widens its rows of W to float32 once and
// runs the float32 tiles (full FMA rate); below it the product is bound by
// reading W and the tiles widen W in registers.
constexpr int32_t kWidenMinRows = 4;

struct Tile {
  const float* x;
  int ldx;
  const uint16_t* w;
  int k;
  const float* bias;
  float* y;
  int ldy;
};

inline void Store(const Tile& t, int i, int j, float sum) {
  t.y[static_cast<int64_t>(i) * t.ldy + j] = sum + (t.bias ? t.bias[j] : 0.0f);
}

template <int MR, int NR>
void TileScalar(const Tile& t) {
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float acc = 0.0f;
      for (int kk = 0; kk < t.k; ++kk) {
        acc += t.x[static_cast<int64_t>(i) * t.ldx + kk] *
               BFloat16ToFloat(t.w[static_cast<int64_t>(j) * t.k + kk]);
      }
      Store(t, i, j, acc);
    }
  }
}

__attribute__((target("avx2,fma"))) inline float Sum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

template <int MR, int NR>
__attribute__((target("avx2,fma"))) void TileAvx2(const Tile& t) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int kk = 0;
  for (; kk + 8 <= t.k; kk += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i)
      xv[i] = _mm256_loadu_ps(t.x + static_cast<int64_t>(i) * t.ldx + kk);
    for (int j = 0; j < NR; ++j) {
      const __m128i raw = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(t.w + static_cast<int64_t>(j) * t.k + kk));
      const __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = Sum256(acc[i][j]);
      for (int r = kk; r < t.k; ++r) {
        sum += t.x[static_cast<int64_t>(i) * t.ldx + r] *
               BFloat16ToFloat(t.w[static_cast<int64_t>(j) * t.k + r]);
      }
      Store(t, i, j, sum);
    }
  }
}

// GCC 12 warns (-Wuninitialized) inside the widening intrinsics, which are
// built on _mm512_undefined_epi32; the warning is about the header, not us.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 Widen16(__m256i raw) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
#pragma GCC diagnostic pop

template <int MR, int NR>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void TileAvx512(const Tile& t) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int kk = 0;
  for (; kk + 16 <= t.k; kk += 16) {
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i)
      xv[i] = _mm512_loadu_ps(t.x + static_cast<int64_t>(i) * t.ldx + kk);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = Widen16(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(t.w + static_cast<int64_t>(j) * t.k + kk)));
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  if (kk < t.k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (t.k - kk)) - 1u);
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) {
      xv[i] = _mm512_maskz_loadu_ps(mask, t.x + static_cast<int64_t>(i) * t.ldx + kk);
    }
    for (int j = 0; j < NR; ++j) {
      const __m512 wv =
          Widen16(_mm256_maskz_loadu_epi16(mask, t.w + static_cast<int64_t>(j) * t.k + kk));
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  float sums[16];
  TileSums<MR, NR>(acc, sums);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) Store(t, i, j, sums[4 * i + j]);
}

__attribute__((always_inline)) inline void WidenBody(const uint16_t* w, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(w[i]) << 16);
  }
}
__attribute__((target("avx512f"))) void WidenAvx512(const uint16_t* w, int64_t count, float* out) {
  WidenBody(w, count, out);
}
__attribute__((target("avx2"))) void WidenAvx2(const uint16_t* w, int64_t count, float* out) {
  WidenBody(w, count, out);
}
void WidenScalar(const uint16_t* w, int64_t count, float* out) { WidenBody(w, count, out); }

using TileFn = void (*)(const Tile&);

template <int MR, int NR>
struct ScalarK {
  static void Run(const Tile& t) { TileScalar<MR, NR>(t); }
};
template <int MR, int NR>
struct Avx2K {
  static void Run(const Tile& t) { TileAvx2<MR, NR>(t); }
};
template <int MR, int NR>
struct Avx512K {
  static void Run(const Tile& t) { TileAvx512<MR, NR>(t); }
};

// kTiles<K>[mr - 1][nr - 1]: the tile kernel of one SIMD level for an mr x nr tile.
template <template <int, int> class K>
constexpr TileFn kTiles[kMr][kNr] = {
    {K<1, 1>::Run, K<1, 2>::Run, K<1, 3>::Run, K<1, 4>::Run},
    {K<2, 1>::Run, K<2, 2>::Run, K<2, 3>::Run, K<2, 4>::Run},
    {K<3, 1>::Run, K<3, 2>::Run, K<3, 3>::Run, K<3, 4>::Run},
    {K<4, 1>::Run, K<4, 2>::Run, K<4, 3>::Run, K<4, 4>::Run},
};

const TileFn (*TilesFor(SimdLevel level))[kNr] {
  switch (level) {
    case SimdLevel::kAvx512:
      return kTiles<Avx512K>;
    case SimdLevel::kAvx2:
      return kTiles<Avx2K>;
    case SimdLevel::kScalar:
      break;
  }
  return kTiles<ScalarK>;
}

}  // namespace

void MatmulBf16Ref(const MatmulBf16Params& p) {
  for (int32_t i = 0; i < p.m; ++i) {
    for (int32_t j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int32_t kk = 0; kk < p.k; ++kk) {
        acc += static_cast<double>(p.x[static_cast<int64_t>(i) * p.ldx + kk]) *
               BFloat16ToFloat(p.w[static_cast<int64_t>(j) * p.k + kk]);
      }
      if (p.bias != nullptr) acc += p.bias[j];
      p.y[static_cast<int64_t>(i) * p.ldy + j] = static_cast<float>(acc);
    }
  }
}

void MatmulBf16(const MatmulBf16Params& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  if (p.m >= kWidenMinRows) {
    auto* widen = level == SimdLevel::kAvx512 ? WidenAvx512
                  : level == SimdLevel::kAvx2 ? WidenAvx2
                                              : WidenScalar;
    pool.Run(p.n, kRowsPerTask, [&](int64_t n_begin, int64_t n_end) {
      thread_local std::vector<float> w_f32;
      w_f32.resize(static_cast<size_t>(n_end - n_begin) * p.k);
      widen(p.w + n_begin * p.k, (n_end - n_begin) * p.k, w_f32.data());
      MatmulSerial({p.x, w_f32.data(), p.bias ? p.bias + n_begin : nullptr, p.y + n_begin, p.m,
                    static_cast<int32_t>(n_end - n_begin), p.k, p.ldx, p.ldy},
                   level);
    });
    return;
  }
  const TileFn(*tiles)[kNr] = TilesFor(level);
  pool.Run(p.n, kRowsPerTask, [&](int64_t n_begin, int64_t n_end) {
    for (int64_t i = 0; i < p.m; i += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, p.m - i));
      for (int64_t j = n_begin; j < n_end; j += kNr) {
        const int nr = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
        const Tile t{p.x + i * p.ldx,     p.ldx, p.w + j * p.k, p.k, p.bias ? p.bias + j : nullptr,
                     p.y + i * p.ldy + j, p.ldy};
        tiles[mr - 1][nr - 1](t);
      }
    }
  });
}

}  // namespace loom::kernels::cpu
