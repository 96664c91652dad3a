// y = x W^T with W kept in ggml's quantized blocks (0.56 to 1.06 bytes per
// weight instead of bfloat16's 2, and weight bytes are what bound decode on
// the CPU), x and y float32. Blocks are decoded to float32 exactly as the GGUF
// dequantizer does (in registers for a few rows of x, per task slice for more;
// Q2_K and Q3_K per task slice at every m) and
// multiplied in float32 like Matmul, so the result is bit-identical to
// dequantizing W and calling Matmul, for any m. With quantize_x, Q4_0 and Q4_1
// from 33 rows of x on (prefill) with AVX2 multiply int8-quantized x on the
// integer units instead (matmul_quant_int8.h): about twice the float32 rate,
// at llama.cpp's precision. With int16_x, x is rounded to 16 bits per block
// and multiplied on the integer units, a relative error near 1e-5: from 8
// rows on AVX-512 VNNI in tiles (matmul_quant_int16.h), up to twice the
// float32 rate; below that, and on AVX2 (K-quants up to 32 rows, the
// 32-value blocks up to 3), row by row (matmul_quant_dot.h), which reads
// K-quant W at 2 to 3 times the float32 decoders' rate at one row.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant_blocks.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {

// All but Q2_K and Q3_K decode in the matmul's registers (Q5_0, Q5_1 and the
// other K-quants in matmul_kquant.cc); those two are widened to float32 per
// slice of W (at every m) and multiplied by Matmul's kernels.
enum class QuantType { kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K };

const char* QuantTypeName(QuantType type);
// Values in one block: kQuantBlock, or kSuperBlock for the K-quants.
int QuantBlockValues(QuantType type);
// Bytes of one block of QuantBlockValues values.
int64_t QuantBlockBytes(QuantType type);

struct MatmulQuantParams {
  const float* x = nullptr;  // [m, k], row stride ldx
  // [n, k / QuantBlockValues] blocks of `type`, rows contiguous; k a multiple
  // of QuantBlockValues(type).
  const void* w = nullptr;
  QuantType type = QuantType::kQ4_0;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [m, n], row stride ldy
  int32_t m = 0;
  int32_t n = 0;
  int32_t k = 0;
  int32_t ldx = 0;
  int32_t ldy = 0;
  // Round x to int8 per block of 32 where the int8 path applies
  // (int8::Supported in matmul_quant_int8.h, at any m; the K-quants' dots in
  // matmul_quant_dot.h, up to 32 rows); the caller picks the steps.
  bool quantize_x = false;
  // Round x to int16 per block of 32 where the int16 path applies
  // (int16::Supported in matmul_quant_int16.h), at any m; quantize_x wins.
  bool int16_x = false;
};

// `count` values (a multiple of QuantBlockValues) of blocks to float32, value
// by value as ggml's dequantizer: d * q (Q8_0), d * (q - 8) (Q4_0), d * q + m
// (Q4_1), and dequant_blocks.h for the others.
void DequantizeBlocks(QuantType type, const void* blocks, int64_t count, float* out);

// Whether quantize_x multiplies `type` by int8 dots at any number of rows up
// to 32 (the K-quants Q4_K, Q5_K and Q6_K, with AVX2; matmul_quant_dot.h).
bool HasInt8Dots(QuantType type, SimdLevel level = DetectedSimd());

// Dequantized W times x with double accumulation.
void MatmulQuantRef(const MatmulQuantParams& p);
void MatmulQuant(const MatmulQuantParams& p, ParallelFor& pool, SimdLevel level = DetectedSimd());

}  // namespace loom::kernels::cpu
