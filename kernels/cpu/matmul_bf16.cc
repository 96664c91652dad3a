// Same register tiling as matmul.cc (4 rows of x by 4 rows of W), with W read
// as bfloat16. The AVX512-BF16 path pre-rounds x to bfloat16 once per call so
// the inner loop is loads and vdpbf16ps only.
#include "kernels/cpu/matmul_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/check.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 4;
constexpr int64_t kRowsPerTask = 16;

struct Tile {
  const float* x;
  const uint16_t* xb;  // x rounded to bfloat16 (AVX512-BF16 path only), row stride k
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
               Bf16ToFloat(t.w[static_cast<int64_t>(j) * t.k + kk]);
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
               Bf16ToFloat(t.w[static_cast<int64_t>(j) * t.k + r]);
      }
      Store(t, i, j, sum);
    }
  }
}

// Not _mm512_reduce_add_ps, and maskz forms of the widening below: GCC 12
// warns (-Wuninitialized) inside the intrinsics built on _mm512_undefined.
__attribute__((target("avx512f"))) inline float Sum512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}

template <int MR, int NR>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void TileAvx512(const Tile& t) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int kk = 0; kk < t.k; kk += 16) {
    const __mmask16 mask =
        t.k - kk >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (t.k - kk)) - 1u);
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) {
      xv[i] = _mm512_maskz_loadu_ps(mask, t.x + static_cast<int64_t>(i) * t.ldx + kk);
    }
    for (int j = 0; j < NR; ++j) {
      const __m256i raw = _mm256_maskz_loadu_epi16(mask, t.w + static_cast<int64_t>(j) * t.k + kk);
      const __m512 wv = _mm512_castsi512_ps(
          _mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, raw), 16));
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) Store(t, i, j, Sum512(acc[i][j]));
}

template <int MR, int NR>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void TileDpBf16(const Tile& t) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int kk = 0; kk < t.k; kk += 32) {
    const __mmask32 mask =
        t.k - kk >= 32 ? __mmask32(0xffffffffu) : static_cast<__mmask32>((1u << (t.k - kk)) - 1u);
    __m512bh xv[MR];
    for (int i = 0; i < MR; ++i) {
      xv[i] = (__m512bh)_mm512_maskz_loadu_epi16(mask, t.xb + static_cast<int64_t>(i) * t.k + kk);
    }
    for (int j = 0; j < NR; ++j) {
      const __m512bh wv =
          (__m512bh)_mm512_maskz_loadu_epi16(mask, t.w + static_cast<int64_t>(j) * t.k + kk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) Store(t, i, j, Sum512(acc[i][j]));
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void RoundRowsToBf16(
    const MatmulBf16Params& p, uint16_t* out) {
  for (int32_t i = 0; i < p.m; ++i) {
    const float* x = p.x + static_cast<int64_t>(i) * p.ldx;
    uint16_t* o = out + static_cast<int64_t>(i) * p.k;
    int32_t kk = 0;
    for (; kk + 16 <= p.k; kk += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + kk),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + kk)));
    }
    for (; kk < p.k; ++kk) o[kk] = FloatToBf16(x[kk]);
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
template <int MR, int NR>
struct DpBf16K {
  static void Run(const Tile& t) { TileDpBf16<MR, NR>(t); }
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
    case SimdLevel::kAvx512Bf16:
      return kTiles<DpBf16K>;
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

uint16_t FloatToBf16(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float Bf16ToFloat(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

void MatmulBf16Ref(const MatmulBf16Params& p) {
  for (int32_t i = 0; i < p.m; ++i) {
    for (int32_t j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int32_t kk = 0; kk < p.k; ++kk) {
        acc += static_cast<double>(p.x[static_cast<int64_t>(i) * p.ldx + kk]) *
               Bf16ToFloat(p.w[static_cast<int64_t>(j) * p.k + kk]);
      }
      if (p.bias != nullptr) acc += p.bias[j];
      p.y[static_cast<int64_t>(i) * p.ldy + j] = static_cast<float>(acc);
    }
  }
}

void MatmulBf16(const MatmulBf16Params& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  thread_local std::vector<uint16_t> x_bf16;
  if (level == SimdLevel::kAvx512Bf16) {
    x_bf16.resize(static_cast<size_t>(p.m) * p.k);
    RoundRowsToBf16(p, x_bf16.data());
  }
  // A thread_local named inside the lambda would be each worker's own copy.
  const uint16_t* xb = x_bf16.data();
  const TileFn(*tiles)[kNr] = TilesFor(level);
  pool.Run(p.n, kRowsPerTask, [&](int64_t n_begin, int64_t n_end) {
    for (int64_t i = 0; i < p.m; i += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, p.m - i));
      for (int64_t j = n_begin; j < n_end; j += kNr) {
        const int nr = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
        const Tile t{p.x + i * p.ldx,     xb + i * p.k, p.ldx,
                     p.w + j * p.k,       p.k,          p.bias ? p.bias + j : nullptr,
                     p.y + i * p.ldy + j, p.ldy};
        tiles[mr - 1][nr - 1](t);
      }
    }
  });
}

}  // namespace loom::kernels::cpu
