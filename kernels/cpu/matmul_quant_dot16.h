// The int16 dot path of MatmulQuant for steps of few rows (decode): x is
// rounded to int16 per block of 32 values (scale s = max |x| / 32767), and each
// row of W is read once, its blocks' integers widened to int16 in registers
// and multiplied by x's on the integer units, vpmaddwd on AVX2 (16 products
// an instruction, against 8 for a float32 FMA, with no float decoding of W)
// or vpdpwssd with AVX-512 VNNI. Every type but Q2_K and Q3_K: Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1 and the K-quants Q4_K, Q5_K, Q6_K.
//
// For block b of a row of W (w = D q + M, q its integers, with Q4_0's -8,
// Q5_0's -16 and Q6_K's -32 in q; D per sub-block of 16 for Q6_K) the
// products of a block land in 8 int32 lanes, exact (a lane holds 4 products
// of at most 128 * 32767, below 2^24, so its float conversion is exact too),
// and add to the output's float32 lanes as acc = fma(float(lanes), D s_b,
// acc); M adds M * (sum of the block's x) in float. The lanes add up at the
// end of the row. What it costs against float32 on the dequantized weights is
// the rounding of x: at most s_b / 2 per value, so
//   |y - x W^T| <= sum_b s_b / 2 * sum_{i in b} |w_i - M_b|
// plus float32's rounding of the sums (matmul_quant_dot16_test.cc), a
// relative error near 1e-5, like the int16 tiles' (matmul_quant_int16.h).
// A row of x gives the same bits whatever the other rows of the step.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu::dot16 {

// Every type but Q2_K and Q3_K, from AVX2 on (with F16C).
bool Supported(QuantType type, SimdLevel level);

// Whether `level` runs the dot products on AVX-512 VNNI (vpdpwssd) rather
// than AVX2's vpmaddwd: kAvx512 on a CPU with VNNI.
bool UsesVnni(SimdLevel level);

// The product for p.m rows of x (any m; meant for a few), W's rows split over
// the pool in tasks of about rows_per_task.
void MatmulDot16(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task,
                 SimdLevel level);

}  // namespace loom::kernels::cpu::dot16
