// RoPE (half-split form) on q and k, with k and v written into the paged pools:
// one block per token, one thread per rotated pair.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

template <typename T>
__global__ void RopeKvWriteKernel(RopeKvWriteParams<T> p) {
  const int t = blockIdx.x;
  const int head_dim = p.kv.head_dim, half = head_dim / 2;
  const float pos = static_cast<float>(p.kv.positions[t]);
  const int32_t slot = p.kv.slot_mapping[t];
  const int q_pairs = p.num_heads * half;
  const int kv_pairs = p.kv.num_kv_heads * half;
  for (int idx = threadIdx.x; idx < q_pairs + kv_pairs; idx += blockDim.x) {
    const bool is_q = idx < q_pairs;
    const int j = is_q ? idx : idx - q_pairs;
    const int head = j / half, i = j % half;
    float sin_v, cos_v;
    sincosf(pos * p.inv_freq[i], &sin_v, &cos_v);
    if (is_q) {
      T* row = p.q + static_cast<int64_t>(t) * p.q_stride + head * head_dim;
      const float x0 = ToFloat(row[i]), x1 = ToFloat(row[i + half]);
      row[i] = FromFloat<T>(x0 * cos_v - x1 * sin_v);
      row[i + half] = FromFloat<T>(x1 * cos_v + x0 * sin_v);
    } else {
      const T* k = p.k + static_cast<int64_t>(t) * p.k_stride + head * head_dim;
      const T* v = p.v + static_cast<int64_t>(t) * p.v_stride + head * head_dim;
      const size_t dst = p.kv.SlotOffset(slot, head);
      const float x0 = ToFloat(k[i]), x1 = ToFloat(k[i + half]);
      p.kv.k_cache[dst + i] = FromFloat<T>(x0 * cos_v - x1 * sin_v);
      p.kv.k_cache[dst + i + half] = FromFloat<T>(x1 * cos_v + x0 * sin_v);
      p.kv.v_cache[dst + i] = v[i];
      p.kv.v_cache[dst + i + half] = v[i + half];
    }
  }
}

}  // namespace

template <typename T>
absl::Status RopeKvWrite(const RopeKvWriteParams<T>& p, cudaStream_t stream) {
  LOOM_KERNEL_CHECK(p.kv.head_dim % 2 == 0 && p.num_heads % p.kv.num_kv_heads == 0);
  LOOM_KERNEL_CHECK(p.kv.block_size > 0 && p.inv_freq != nullptr);
  if (p.kv.num_tokens == 0) return absl::OkStatus();
  RopeKvWriteKernel<T><<<p.kv.num_tokens, 256, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

template absl::Status RopeKvWrite<float>(const RopeKvWriteParams<float>&, cudaStream_t);
template absl::Status RopeKvWrite<__nv_bfloat16>(const RopeKvWriteParams<__nv_bfloat16>&,
                                                 cudaStream_t);

}  // namespace loom::kernels::cuda
