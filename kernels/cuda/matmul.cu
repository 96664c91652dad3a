// Linear layers: cuBLASLt for x W^T, then the bias (Qwen-style qkv) if any.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

// Rows past grid.y's limit: grid-stride over rows.
__global__ void AddBiasKernel(__nv_bfloat16* y, int64_t m, int ldy, int n,
                              const __nv_bfloat16* bias) {
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
      y[row * ldy + j] =
          __float2bfloat16(__bfloat162float(y[row * ldy + j]) + __bfloat162float(bias[j]));
    }
  }
}

}  // namespace

absl::Status Matmul(const MatmulParams<__nv_bfloat16>& p, ::loom::cuda::Gemm& gemm,
                    cudaStream_t stream) {
  LOOM_KERNEL_CHECK(p.m >= 0 && p.n > 0 && p.k > 0 && p.ldx >= p.k && p.ldy >= p.n);
  if (p.m == 0) return absl::OkStatus();
  LOOM_RETURN_IF_ERROR(gemm.Run(stream, p.x, p.ldx, p.w, p.y, p.ldy, p.m, p.n, p.k));
  if (p.bias != nullptr) {
    AddBiasKernel<<<dim3((p.n + 255) / 256, GridRows(p.m)), 256, 0, stream>>>(p.y, p.m, p.ldy, p.n,
                                                                              p.bias);
    LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  }
  return absl::OkStatus();
}

}  // namespace loom::kernels::cuda
