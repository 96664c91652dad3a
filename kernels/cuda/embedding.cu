// Embedding gather: one block per token copies its table row in 16-byte pieces
// (scaled in float32 when the params ask for it).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

template <typename T>
__global__ void EmbeddingKernel(EmbeddingParams<T> p) {
  const int t = blockIdx.x;
  const int64_t id = p.token_ids[t];
  const T* src = p.table + id * p.hidden;
  T* dst = p.out + static_cast<int64_t>(t) * p.hidden;
  constexpr int kVec = Vec16<T>::kVec;
  for (int i = threadIdx.x * kVec; i < p.hidden; i += blockDim.x * kVec) {
    Vec16<T> v;
    v.Load(src + i);
    if (p.scale != 1.0f) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v.Set(e, v.Get(e) * p.scale);
    }
    v.Store(dst + i);
  }
}

}  // namespace

template <typename T>
absl::Status Embedding(const EmbeddingParams<T>& p, cudaStream_t stream) {
  LOOM_KERNEL_CHECK(p.num_tokens >= 0 && p.vocab_size > 0);
  LOOM_KERNEL_CHECK(p.hidden % Vec16<T>::kVec == 0);
  if (p.num_tokens == 0) return absl::OkStatus();
  EmbeddingKernel<T><<<p.num_tokens, 256, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

template absl::Status Embedding<float>(const EmbeddingParams<float>&, cudaStream_t);
template absl::Status Embedding<__nv_bfloat16>(const EmbeddingParams<__nv_bfloat16>&, cudaStream_t);

}  // namespace loom::kernels::cuda
