// SiLU(gate) * up and GELU-tanh(gate) * up, elementwise over 16-byte vectors
// of each token row.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

struct Silu {
  __device__ __forceinline__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct GeluTanh {
  __device__ __forceinline__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};

template <typename T, typename Act>
__global__ void GatedMulKernel(SiluMulParams<T> p) {
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
      o.Set(e, Act()(g.Get(e)) * u.Get(e));
    }
    o.Store(p.out + t * p.out_stride + i);
  }
}

template <typename T, typename Act>
absl::Status LaunchGatedMul(const SiluMulParams<T>& p, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kVec;
  LOOM_KERNEL_CHECK(p.dim % kVec == 0 && p.in_stride % kVec == 0 && p.out_stride % kVec == 0);
  LOOM_KERNEL_CHECK((p.up - p.gate) % kVec == 0);
  if (p.num_tokens == 0) return absl::OkStatus();
  const dim3 grid((p.dim / kVec + 127) / 128, GridRows(p.num_tokens));
  GatedMulKernel<T, Act><<<grid, 128, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status SiluMul(const SiluMulParams<T>& p, cudaStream_t stream) {
  return LaunchGatedMul<T, Silu>(p, stream);
}

template <typename T>
absl::Status GeluTanhMul(const SiluMulParams<T>& p, cudaStream_t stream) {
  return LaunchGatedMul<T, GeluTanh>(p, stream);
}

template absl::Status SiluMul<float>(const SiluMulParams<float>&, cudaStream_t);
template absl::Status SiluMul<__nv_bfloat16>(const SiluMulParams<__nv_bfloat16>&, cudaStream_t);
template absl::Status GeluTanhMul<float>(const SiluMulParams<float>&, cudaStream_t);
template absl::Status GeluTanhMul<__nv_bfloat16>(const SiluMulParams<__nv_bfloat16>&, cudaStream_t);

}  // namespace loom::kernels::cuda
