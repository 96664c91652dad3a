// ggml's quantized types Loom reads (Q8_0, Q4_0, Q4_1): their block layouts
// (shared with the CPU kernels, which multiply by the blocks directly),
// dequantization to float32 and quantization for test fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/matmul_quant_blocks.h"

namespace loom {

// The block structs live with the CPU kernels that read them.
using kernels::BlockQ4_0;
using kernels::BlockQ4_1;
using kernels::BlockQ8_0;
using kernels::kQuantBlock;

// Dequantize `n` values (a multiple of 32) from raw block bytes.
void DequantizeQ8_0(std::span<const std::byte> blocks, std::span<float> out);
void DequantizeQ4_0(std::span<const std::byte> blocks, std::span<float> out);
void DequantizeQ4_1(std::span<const std::byte> blocks, std::span<float> out);

// Quantize `in` (a multiple of 32 values) as ggml does; for tests and fixtures.
void QuantizeQ8_0(std::span<const float> in, std::span<std::byte> blocks);
void QuantizeQ4_0(std::span<const float> in, std::span<std::byte> blocks);
void QuantizeQ4_1(std::span<const float> in, std::span<std::byte> blocks);

}  // namespace loom
