// SiLU(gate) * up, elementwise over 16-byte vectors of each token row.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

template <typename T>
__global__ void SiluMulKernel(SiluMulParams<T> p) {
  constexpr int kVec = Vec16<T>::kVec;
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  if (i >= p.dim) return;
  // Rows past grid.y's limit: grid-stride over tokens.
  for (int64_t t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    Vec16<T> g, u, o;
    g.Load(p.gate + t * p.in_stride + i);
    u.Load(p.up + t * p.in_stride + i);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float x = g.Get(e);
      o.Set(e, x / (1.0f + expf(-x)) * u.Get(e));
    }
    o.Store(p.out + t * p.out_stride + i);
  }
}

}  // namespace

template <typename T>
absl::Status SiluMul(const SiluMulParams<T>& p, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kVec;
  LOOM_KERNEL_CHECK(p.dim % kVec == 0 && p.in_stride % kVec == 0 && p.out_stride % kVec == 0);
  LOOM_KERNEL_CHECK((p.up - p.gate) % kVec == 0);
  if (p.num_tokens == 0) return absl::OkStatus();
  const dim3 grid((p.dim / kVec + 127) / 128, GridRows(p.num_tokens));
  SiluMulKernel<T><<<grid, 128, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

template absl::Status SiluMul<float>(const SiluMulParams<float>&, cudaStream_t);
template absl::Status SiluMul<__nv_bfloat16>(const SiluMulParams<__nv_bfloat16>&, cudaStream_t);

}  // namespace loom::kernels::cuda
