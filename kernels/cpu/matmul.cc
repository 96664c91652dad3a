// y = x W^T as register-tiled dot products: a tile of up to 4 rows of x by 4
// rows of W accumulates 16 vector partial sums over k, so each loaded vector
// feeds 4 FMAs. Threads split W's rows; W rows stay hot in cache while the
// tile walks every row of x.
#include <immintrin.h>

#include <algorithm>

#include "base/check.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd_reduce.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kMr = 4;  // rows of x per tile
constexpr int kNr = 4;  // rows of W per tile
// Rows of W per parallel task: enough work to amortise dispatch, while still
// giving every thread several tasks for load balance.
constexpr int64_t kRowsPerTask = 16;

struct Tile {
  const float* x;
  int ldx;
  const float* w;
  int k;
  const float* bias;
  float* y;
  int ldy;
};

template <int MR, int NR>
void TileScalar(const Tile& t) {
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const float* xr = t.x + static_cast<int64_t>(i) * t.ldx;
      const float* wr = t.w + static_cast<int64_t>(j) * t.k;
      float acc = 0.0f;
      for (int kk = 0; kk < t.k; ++kk) acc += xr[kk] * wr[kk];
      t.y[static_cast<int64_t>(i) * t.ldy + j] = acc + (t.bias ? t.bias[j] : 0.0f);
    }
  }
}

__attribute__((target("avx2,fma"))) inline float HorizontalSum256(__m256 v) {
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
      const __m256 wv = _mm256_loadu_ps(t.w + static_cast<int64_t>(j) * t.k + kk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = HorizontalSum256(acc[i][j]);
      for (int r = kk; r < t.k; ++r) {
        sum += t.x[static_cast<int64_t>(i) * t.ldx + r] * t.w[static_cast<int64_t>(j) * t.k + r];
      }
      t.y[static_cast<int64_t>(i) * t.ldy + j] = sum + (t.bias ? t.bias[j] : 0.0f);
    }
  }
}

template <int MR, int NR>
__attribute__((target("avx512f"))) void TileAvx512(const Tile& t) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int kk = 0;
  for (; kk + 16 <= t.k; kk += 16) {
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i)
      xv[i] = _mm512_loadu_ps(t.x + static_cast<int64_t>(i) * t.ldx + kk);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = _mm512_loadu_ps(t.w + static_cast<int64_t>(j) * t.k + kk);
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
      const __m512 wv = _mm512_maskz_loadu_ps(mask, t.w + static_cast<int64_t>(j) * t.k + kk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  float sums[16];
  TileSums<MR, NR>(acc, sums);
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      t.y[static_cast<int64_t>(i) * t.ldy + j] = sums[4 * i + j] + (t.bias ? t.bias[j] : 0.0f);
    }
  }
}

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

// Rows [n_begin, n_end) of W against every row of x.
void MatmulRows(const MatmulParams<float>& p, const TileFn (*tiles)[kNr], int64_t n_begin,
                int64_t n_end) {
  for (int64_t i = 0; i < p.m; i += kMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kMr, p.m - i));
    for (int64_t j = n_begin; j < n_end; j += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
      const Tile t{p.x + i * p.ldx,     p.ldx, p.w + j * p.k, p.k, p.bias ? p.bias + j : nullptr,
                   p.y + i * p.ldy + j, p.ldy};
      tiles[mr - 1][nr - 1](t);
    }
  }
}

}  // namespace

void MatmulRef(const MatmulParams<float>& p) {
  for (int32_t i = 0; i < p.m; ++i) {
    for (int32_t j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int32_t kk = 0; kk < p.k; ++kk) {
        acc += static_cast<double>(p.x[static_cast<int64_t>(i) * p.ldx + kk]) *
               p.w[static_cast<int64_t>(j) * p.k + kk];
      }
      if (p.bias != nullptr) acc += p.bias[j];
      p.y[static_cast<int64_t>(i) * p.ldy + j] = static_cast<float>(acc);
    }
  }
}

void MatmulSerial(const MatmulParams<float>& p, SimdLevel level) {
  MatmulRows(p, TilesFor(level), 0, p.n);
}

void MatmulWithSimd(const MatmulParams<float>& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  const TileFn(*tiles)[kNr] = TilesFor(level);
  pool.Run(p.n, kRowsPerTask,
           [&](int64_t n_begin, int64_t n_end) { MatmulRows(p, tiles, n_begin, n_end); });
}

void Matmul(const MatmulParams<float>& p, ParallelFor& pool) {
  MatmulWithSimd(p, pool, DetectedSimd());
}

}  // namespace loom::kernels::cpu
