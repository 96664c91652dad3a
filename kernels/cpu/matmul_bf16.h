// y = x W^T with W stored as bfloat16 (half the bytes of float32, which is what
// bounds decode on the CPU) and x, y in float32: W is widened to float32 (in
// registers for a few rows of x, per task slice for more) and multiplied in
// float32 exactly like Matmul, so results are bit-identical for any m.
#pragma once

#include <cstdint>

#include "base/float16.h"  // FloatToBFloat16 packs weights for MatmulBf16
#include "kernels/cpu/cpu_features.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {

struct MatmulBf16Params {
  const float* x = nullptr;     // [m, k], row stride ldx
  const uint16_t* w = nullptr;  // [n, k] bfloat16 bits, row stride k
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [m, n], row stride ldy
  int32_t m = 0;
  int32_t n = 0;
  int32_t k = 0;
  int32_t ldx = 0;
  int32_t ldy = 0;
};

void MatmulBf16Ref(const MatmulBf16Params& p);
void MatmulBf16(const MatmulBf16Params& p, ParallelFor& pool, SimdLevel level = DetectedSimd());

}  // namespace loom::kernels::cpu
