// Residual add + RMSNorm: one block per token; the row is staged in registers
// between the sum-of-squares pass and the scaling pass. The q/k head norm: one
// warp per (token, head), in place.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxVecsPerThread = 4;  // hidden <= 256 * 4 * kVec (8192 bf16, 4096 f32)

template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormKernel(RmsNormParams<T> p) {
  __shared__ float scratch[32];
  constexpr int kVec = Vec16<T>::kVec;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.hidden;
  float vals[kMaxVecsPerThread][kVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVecsPerThread; ++j) {
    const int i = (j * kThreads + threadIdx.x) * kVec;
    if (i >= p.hidden) break;
    Vec16<T> r;
    r.Load(p.residual + row + i);
    if (p.x != nullptr) {
      Vec16<T> x;
      x.Load(p.x + row + i);
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.Set(e, r.Get(e) + x.Get(e));
      r.Store(p.residual + row + i);
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      vals[j][e] = r.Get(e);  // the stored (rounded) residual, as the reference sees it
      sum_sq += vals[j][e] * vals[j][e];
    }
  }
  const float inv_rms = rsqrtf(BlockSum(sum_sq, scratch) / p.hidden + p.eps);
#pragma unroll
  for (int j = 0; j < kMaxVecsPerThread; ++j) {
    const int i = (j * kThreads + threadIdx.x) * kVec;
    if (i >= p.hidden) break;
    Vec16<T> w, o;
    w.Load(p.weight + i);
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.Set(e, vals[j][e] * inv_rms * w.Get(e));
    o.Store(p.out + row + i);
  }
}

constexpr int kMaxHeadDim = 512;

template <typename T>
__global__ void HeadRmsNormKernel(HeadRmsNormParams<T> p) {
  constexpr int kPerLane = kMaxHeadDim / 32;
  T* x = p.x + static_cast<int64_t>(blockIdx.x) * p.row_stride +
         static_cast<int64_t>(blockIdx.y) * p.head_dim;
  const int lane = threadIdx.x;
  float vals[kPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int i = j * 32 + lane;
    vals[j] = i < p.head_dim ? ToFloat(x[i]) : 0.0f;
    sum_sq += vals[j] * vals[j];
  }
  const float inv_rms = rsqrtf(WarpSum(sum_sq) / p.head_dim + p.eps);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int i = j * 32 + lane;
    if (i < p.head_dim) x[i] = FromFloat<T>(vals[j] * inv_rms * ToFloat(p.weight[i]));
  }
}

}  // namespace

template <typename T>
absl::Status HeadRmsNorm(const HeadRmsNormParams<T>& p, cudaStream_t stream) {
  LOOM_KERNEL_CHECK(p.head_dim > 0 && p.head_dim <= kMaxHeadDim && p.num_heads > 0);
  LOOM_KERNEL_CHECK(p.num_heads <= 65535 && p.row_stride >= p.num_heads * p.head_dim);
  if (p.num_tokens == 0) return absl::OkStatus();
  HeadRmsNormKernel<T><<<dim3(p.num_tokens, p.num_heads), 32, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

template absl::Status HeadRmsNorm<float>(const HeadRmsNormParams<float>&, cudaStream_t);
template absl::Status HeadRmsNorm<__nv_bfloat16>(const HeadRmsNormParams<__nv_bfloat16>&,
                                                 cudaStream_t);

template <typename T>
absl::Status RmsNorm(const RmsNormParams<T>& p, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kVec;
  LOOM_KERNEL_CHECK(p.hidden % kVec == 0 && p.hidden <= kThreads * kMaxVecsPerThread * kVec);
  LOOM_KERNEL_CHECK(p.out != p.residual);
  if (p.num_tokens == 0) return absl::OkStatus();
  RmsNormKernel<T><<<p.num_tokens, kThreads, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

template absl::Status RmsNorm<float>(const RmsNormParams<float>&, cudaStream_t);
template absl::Status RmsNorm<__nv_bfloat16>(const RmsNormParams<__nv_bfloat16>&, cudaStream_t);

}  // namespace loom::kernels::cuda
