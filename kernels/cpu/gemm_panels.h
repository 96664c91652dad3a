// A float32 GEMM for many rows (prefill): C[m, 16] = A[m, k] B[k, 16] with B
// one panel of 16 columns stored k-major, so that a 6 x 16 block of C stays in
// 12 AVX2 registers while k streams by (the shape of BLIS's Haswell kernel):
// per k, 2 loads of B and 6 broadcasts of A feed 12 FMAs, where the register
// tiles of matmul_tiles.h (4 x 4 dot products, 16 accumulators plus the
// operands in 16 registers) spill and reach about 40% of the FMA rate.
//
// Each output accumulates its k products in k order in one float32 lane, one
// FMA each, whatever m, its row's place in the block or the thread: a row's
// result never depends on the other rows. The matmuls use it for W's rows
// widened to float32 and packed in panels; the prefill attention for Q K^T
// (K transposed into a panel) and P V (V's rows are panels as they lie).
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace loom::kernels::cpu::panels {

inline constexpr int kWidth = 16;  // columns of a panel

// The panel kernels need AVX2 and FMA; the callers keep their own paths
// below that.
inline bool Supported(SimdLevel level) { return level >= SimdLevel::kAvx2; }

struct Operands {
  const float* a = nullptr;  // [m, k], row stride lda
  int64_t lda = 0;
  const float* b = nullptr;  // [k, kWidth], row stride ldb (>= kWidth)
  int64_t ldb = kWidth;
  float* c = nullptr;  // [m, columns], row stride ldc
  int64_t ldc = 0;
  int32_t m = 0;
  int32_t k = 0;
  // Columns of C that exist (1..kWidth); the panel's others are computed and
  // dropped, so B's padding columns need only be finite.
  int32_t columns = kWidth;
  // C += A B (the sums start from C) instead of C = A B.
  bool accumulate = false;
  const float* bias = nullptr;  // [columns] added once to each finished sum, or null
};

// Only for a level that is Supported.
void Gemm(const Operands& p);

// panel[kk * kWidth + j] = rows[j * ld + kk] for j < count, 0 for count <= j <
// kWidth, kk < k.
void Pack(const float* rows, int64_t ld, int count, int k, float* panel);

}  // namespace loom::kernels::cpu::panels
