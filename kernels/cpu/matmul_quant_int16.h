// The int16 path of MatmulQuant on CPUs with AVX-512 VNNI: x is rounded to
// int16 per block of 32 values (scale s = max |x| / 32767), W's blocks are
// decoded to their integers v with a float scale D and offset M per block of
// 32 (w = D v + M: Q4_1's d and m, Q4_K's d sc and -dmin mn, Q6_K's d with
// its sub-block scales folded into v), and each block's dot product of
// integers runs exactly in int32 on vpdpwssd, 32 products an instruction,
// twice the float32 FMA rate. A block adds to an output as
//   acc = fma(float(I) * s, D, acc), then acc = fma(sum of x, M, acc)
// in k order, whatever the tile, so a row's result does not depend on the
// other rows or on their number. The tiles put 16 (or 8) rows of x in the
// lanes of a vector and broadcast W's pairs of values.
//
// What it costs against float32 on the dequantized weights: the rounding of x
// to 16 bits, at most max |x| / 65534 per value of the block (Q6_K: x to 15
// bits, so that its sums fit in int32), a relative error near 1e-5 of a
// product's scale, 400 times smaller than the int8 path's.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu::int16 {

// Every type but Q2_K and Q3_K, at kAvx512 on a CPU with AVX-512 VNNI.
bool Supported(QuantType type, SimdLevel level);

// The product for p.m rows of x, W's rows split over the pool in tasks of
// about rows_per_task.
void MatmulInt16(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task);

}  // namespace loom::kernels::cpu::int16
