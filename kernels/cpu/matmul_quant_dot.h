// The dot path of MatmulQuant for steps of few rows (decode): x is
// rounded to int16 (or, for the K-quants, int8) per block of 32 values
// (scale s = max |x| / 32767, or / 127), and each
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
// plus float32's rounding of the sums (matmul_quant_dot_test.cc), a
// relative error near 1e-5, like the int16 tiles' (matmul_quant_int16.h).
//
// With int8 x (XBits::k8; Q4_K, Q5_K and Q6_K; --cpu_decode_precision=int8)
// W's bytes need no widening: vpmaddubsw multiplies W's unsigned values
// (Q6_K's q before its -32) by x's signed ones into 16-bit pair sums (at most
// 2 * 63 * 127 = 16002) and vpmaddwd by the block's integer scale widens them
// to 8 int32 lanes, one conversion and FMA per block and row; Q6_K's -32
// comes off as 32 times the scales times the rounded x's sums per 16 values.
// About half the instructions a value of the int16 dots. The bound is the
// same with s_b = max |x_b| / 127: a relative error near 1/254 per value
// where int16's is near 1/65534, as the int8 panels' (matmul_quant_int8.h),
// llama.cpp's order of precision.
//
// Both read W a fixed distance ahead with software prefetches: each task
// streams its rows, and the hardware prefetchers alone leave the loads
// waiting on memory.
//
// A row of x gives the same bits whatever the other rows of the step.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu::dot {

// The integers x is rounded to.
enum class XBits { k16, k8 };

// From AVX2 on (with F16C): with int16 x every type but Q2_K and Q3_K; with
// int8 x Q4_K, Q5_K and Q6_K.
bool Supported(QuantType type, SimdLevel level, XBits bits);

// Whether `level` runs the dot products on AVX-512 VNNI (vpdpwssd,
// vpdpbusd) rather than AVX2's vpmaddwd (and vpmaddubsw): kAvx512 on a CPU
// with VNNI.
bool UsesVnni(SimdLevel level);

// The product for p.m rows of x (any m; meant for a few), W's rows split over
// the pool in tasks of about rows_per_task.
void MatmulDot(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task,
               SimdLevel level, XBits bits);

}  // namespace loom::kernels::cpu::dot
