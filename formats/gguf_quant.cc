#include "formats/gguf_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/cpu/matmul_quant.h"

namespace loom {
namespace {

template <typename Block>
void StoreBlock(const Block& b, std::span<std::byte> blocks, size_t i) {
  std::memcpy(blocks.data() + i * sizeof(Block), &b, sizeof(Block));
}

template <typename Block>
size_t CheckSizes(size_t num_block_bytes, size_t num_values) {
  LOOM_CHECK_EQ(num_values % kQuantBlock, 0u);
  LOOM_CHECK_EQ(num_block_bytes, num_values / kQuantBlock * sizeof(Block));
  return num_values / kQuantBlock;
}

}  // namespace

// The kernels' decoder, so that dequantized float32 weights have exactly the
// values the quantized matmul multiplies with.
void DequantizeQ8_0(std::span<const std::byte> blocks, std::span<float> out) {
  CheckSizes<BlockQ8_0>(blocks.size(), out.size());
  kernels::cpu::DequantizeBlocks(kernels::cpu::QuantType::kQ8_0, blocks.data(), out.size(),
                                 out.data());
}

void DequantizeQ4_0(std::span<const std::byte> blocks, std::span<float> out) {
  CheckSizes<BlockQ4_0>(blocks.size(), out.size());
  kernels::cpu::DequantizeBlocks(kernels::cpu::QuantType::kQ4_0, blocks.data(), out.size(),
                                 out.data());
}

void DequantizeQ4_1(std::span<const std::byte> blocks, std::span<float> out) {
  CheckSizes<BlockQ4_1>(blocks.size(), out.size());
  kernels::cpu::DequantizeBlocks(kernels::cpu::QuantType::kQ4_1, blocks.data(), out.size(),
                                 out.data());
}

void QuantizeQ8_0(std::span<const float> in, std::span<std::byte> blocks) {
  const size_t nb = CheckSizes<BlockQ8_0>(blocks.size(), in.size());
  for (size_t i = 0; i < nb; ++i) {
    const float* x = in.data() + i * kQuantBlock;
    float amax = 0;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = FloatToHalf(d);
    for (int j = 0; j < kQuantBlock; ++j) b.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
    StoreBlock(b, blocks, i);
  }
}

void QuantizeQ4_0(std::span<const float> in, std::span<std::byte> blocks) {
  const size_t nb = CheckSizes<BlockQ4_0>(blocks.size(), in.size());
  for (size_t i = 0; i < nb; ++i) {
    const float* x = in.data() + i * kQuantBlock;
    // The value of largest magnitude maps to -8, as ggml does.
    float amax = 0, max = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ4_0 b;
    b.d = FloatToHalf(d);
    auto q = [&](float v) {
      return static_cast<uint8_t>(std::min(15, static_cast<int>(v * id + 8.5f)));
    };
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      b.qs[j] = q(x[j]) | (q(x[j + kQuantBlock / 2]) << 4);
    }
    StoreBlock(b, blocks, i);
  }
}

void QuantizeQ4_1(std::span<const float> in, std::span<std::byte> blocks) {
  const size_t nb = CheckSizes<BlockQ4_1>(blocks.size(), in.size());
  for (size_t i = 0; i < nb; ++i) {
    const float* x = in.data() + i * kQuantBlock;
    float min = x[0], max = x[0];
    for (int j = 1; j < kQuantBlock; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ4_1 b;
    b.d = FloatToHalf(d);
    b.m = FloatToHalf(min);
    auto q = [&](float v) {
      return static_cast<uint8_t>(std::min(15, static_cast<int>((v - min) * id + 0.5f)));
    };
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      b.qs[j] = q(x[j]) | (q(x[j + kQuantBlock / 2]) << 4);
    }
    StoreBlock(b, blocks, i);
  }
}

}  // namespace loom
