// The int8 path of MatmulQuant for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 weights on
// AVX2, as llama.cpp multiplies them: x is quantized to int8 per block of 32
// values (a float scale and the block's integer sum, ggml's Q8_1), W's values
// are unpacked into panels of 8 rows whose groups of 4 values interleave, and
// the dot products run on the integer units: vpmaddubsw multiplies 32
// unsigned values of W (0..15, 0..31; Q8_0's |w|, with w's sign moved onto x)
// by signed 8-bit values of x into 16 pair sums, which add up in 16 bits as
// long as they cannot overflow (8 groups of 4-bit values: at most 8 * 2 * 15
// * 127 = 30480; 4 of 5-bit; 1 of Q8_0) and widen to 32 with vpmaddwd. That
// is about twice the float32 FMA rate of the panel GEMM; what it costs is the
// rounding of x to 8 bits (a relative error of at most 1/254 of each block's
// largest value per element), bounded in the tests.
//
// Each output sums its blocks in k order, the block's offset term (Q4_1's
// and Q5_1's m, Q4_0's -8, Q5_0's -16) included, so a row's result does not
// depend on the other rows.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu::int8 {

// Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 from AVX2 on.
bool Supported(QuantType type, SimdLevel level);

// The product for p.m rows of x, W's rows split over the pool in tasks of
// about rows_per_task.
void MatmulInt8(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task);

}  // namespace loom::kernels::cpu::int8
