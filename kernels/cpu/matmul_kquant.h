// The register decoders of Q5_0, Q5_1, Q4_K, Q5_K and Q6_K for the quantized
// matmul (matmul_quant.cc): W is decoded 32 values at a time (one Q5 block,
// one K-quant sub-block) straight into the shared register tiles, with the
// float operations of the scalar decoders (dequant_blocks.h), so the product
// keeps the bits of float32 Matmul on the dequantized weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/matmul_tiles.h"

namespace loom::kernels::cpu {

// One SIMD level's kernels for one block type.
struct QuantKernels {
  const tiles::TileTable<std::byte>* tiles;
  // Whole blocks of one type to float32 (the widening path of large m).
  void (*dequant)(const std::byte* blocks, int64_t num_blocks, float* out);
};

// The kernels of Q5_0, Q5_1, Q4_K, Q5_K and Q6_K; nullopt for other types.
std::optional<QuantKernels> RegisterDecodedKernels(QuantType type, SimdLevel level);

}  // namespace loom::kernels::cpu
