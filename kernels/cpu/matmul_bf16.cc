// y = x W^T with bfloat16 weights: the policy of the shared register tiles
// (matmul_tiles.h) widens W to float32 as it loads it, so every path gives
// each output the bits of the float32 matmul whatever the number of rows of x,
// and a sequence's logits do not depend on the rest of its batch.
#include "kernels/cpu/matmul_bf16.h"

#include <immintrin.h>

#include <bit>

#include "base/check.h"
#include "kernels/cpu/matmul_tiles.h"

namespace loom::kernels::cpu {
namespace {

constexpr int64_t kRowsPerTask = 16;
// From this many rows of x on, a task widens its rows of W to float32 once and
// runs the float32 tiles (full FMA rate); below it the product is bound by
// reading W and the tiles widen W in registers.
constexpr int32_t kWidenMinRows = 4;

// GCC 12 warns (-Wuninitialized) inside the widening intrinsics, which are
// built on _mm512_undefined_epi32; the warning is about the header, not us.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
LOOM_TILES_AVX512 inline __m512 Widen16(__m256i raw) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
#pragma GCC diagnostic pop

struct BFloat16Weights {
  using W = uint16_t;
  static constexpr int kScalarStep = 1;
  static constexpr int kAvx2Vectors = 1;
  static constexpr int kAvx512Vectors = 1;
  static constexpr bool kHasTail = true;

  static void LoadScalar(const uint16_t* row, int kk, float* out) {
    out[0] = BFloat16ToFloat(row[kk]);
  }
  static float Value(const uint16_t* row, int r) { return BFloat16ToFloat(row[r]); }
  LOOM_TILES_AVX2 static void LoadAvx2(const uint16_t* row, int s, __m256 (&v)[1]) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 8 * s));
    v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
  LOOM_TILES_AVX512 static void LoadAvx512(const uint16_t* row, int s, __m512 (&v)[1]) {
    v[0] = Widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 * s)));
  }
  LOOM_TILES_AVX512 static __m512 LoadMaskedAvx512(const uint16_t* row, int kk, __mmask16 mask) {
    return Widen16(_mm256_maskz_loadu_epi16(mask, row + kk));
  }
  template <int NR>
  static void Prefetch(const tiles::Tile<uint16_t>&, int) {}
};

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
  const tiles::Operands<uint16_t> ops{p.x, p.w, p.k, p.bias, p.y, p.m, p.n, p.k, p.ldx, p.ldy};
  if (p.m >= kWidenMinRows) {
    auto* widen = level == SimdLevel::kAvx512 ? WidenAvx512
                  : level == SimdLevel::kAvx2 ? WidenAvx2
                                              : WidenScalar;
    tiles::RunWidened(
        ops, pool, level, kRowsPerTask, kRowsPerTask,
        [&](const uint16_t* rows, int64_t count, float* out) { widen(rows, count * p.k, out); });
    return;
  }
  tiles::RunTiles(ops, tiles::TilesFor<BFloat16Weights>(level), pool, kRowsPerTask);
}

}  // namespace loom::kernels::cpu
