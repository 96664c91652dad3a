#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/random_fill.h"
#include "kernels/philox.h"

namespace loom::cuda {
namespace {

// One Philox call gives four 32-bit words, i.e. eight 16-bit values: each
// thread writes 8 bf16 (16 bytes) per call.
__global__ void RandomFillKernel(__nv_bfloat16* data, int64_t n, float scale, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g * 8 < n;
       g += stride) {
    const kernels::Philox4x32Result r =
        kernels::Philox4x32_10(static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), 0x5EEDu,
                               0u, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t i = g * 8 + j;
      if (i >= n) break;
      const uint32_t bits = (r.v[j / 2] >> ((j % 2) * 16)) & 0xFFFFu;
      const float u = static_cast<float>(bits) * (1.0f / 65536.0f);
      data[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
    }
  }
}

__global__ void FillKernel(__nv_bfloat16* data, int64_t n, float value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const __nv_bfloat16 v = __float2bfloat16(value);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    data[i] = v;
  }
}

int GridFor(int64_t work) {
  const int64_t blocks = (work + 255) / 256;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

absl::Status RandomFillBFloat16(cudaStream_t stream, __nv_bfloat16* data, int64_t n, float scale,
                                uint64_t seed) {
  if (n == 0) return absl::OkStatus();
  RandomFillKernel<<<GridFor((n + 7) / 8), 256, 0, stream>>>(data, n, scale, seed);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

absl::Status FillBFloat16(cudaStream_t stream, __nv_bfloat16* data, int64_t n, float value) {
  if (n == 0) return absl::OkStatus();
  FillKernel<<<GridFor(n), 256, 0, stream>>>(data, n, value);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

}  // namespace loom::cuda
