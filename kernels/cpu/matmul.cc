// y = x W^T with float32 weights: the policy of the shared register tiles
// (matmul_tiles.h) is a plain load. Threads split W's rows; W rows stay hot in
// cache while the tile walks every row of x.
#include <immintrin.h>

#include <cstring>

#include "base/check.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

// Rows of W per parallel task: enough work to amortise dispatch, while still
// giving every thread several tasks for load balance.
constexpr int64_t kRowsPerTask = 16;

struct Float32Weights {
  using W = float;
  static constexpr int kScalarStep = 1;
  static constexpr int kAvx2Vectors = 1;
  static constexpr int kAvx512Vectors = 1;
  static constexpr bool kHasTail = true;

  static void LoadScalar(const float* row, int kk, float* out) { out[0] = row[kk]; }
  static float Value(const float* row, int r) { return row[r]; }
  LOOM_TILES_AVX2 static void LoadAvx2(const float* row, int s, __m256 (&v)[1]) {
    v[0] = _mm256_loadu_ps(row + 8 * s);
  }
  LOOM_TILES_AVX512 static void LoadAvx512(const float* row, int s, __m512 (&v)[1]) {
    v[0] = _mm512_loadu_ps(row + 16 * s);
  }
  LOOM_TILES_AVX512 static __m512 LoadMaskedAvx512(const float* row, int kk, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, row + kk);
  }
  template <int NR>
  static void Prefetch(const tiles::Tile<float>&, int) {}
};

tiles::Operands<float> OperandsOf(const MatmulParams<float>& p) {
  return {p.x, p.w, p.k, p.bias, p.y, p.m, p.n, p.k, p.ldx, p.ldy};
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
  tiles::TileRows(OperandsOf(p), tiles::TilesFor<Float32Weights>(level), 0, p.n);
}

void MatmulWithSimd(const MatmulParams<float>& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  if (p.m >= kPanelMinRows && panels::Supported(level)) {
    // The same panels as the other formats' widened W, so that they all give
    // the bits of this matmul on their float32 values.
    tiles::RunPanels(OperandsOf(p), pool, kRowsPerTask,
                     [&](const float* rows, int count, float* out) {
                       std::memcpy(out, rows, sizeof(float) * count * p.k);
                     });
    return;
  }
  tiles::RunTiles(OperandsOf(p), tiles::TilesFor<Float32Weights>(level), pool, kRowsPerTask);
}

void Matmul(const MatmulParams<float>& p, ParallelFor& pool) {
  MatmulWithSimd(p, pool, DetectedSimd());
}

}  // namespace loom::kernels::cpu
