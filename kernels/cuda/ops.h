// Launchers of the CUDA op set. Each takes the params struct its CPU reference
// takes (kernels/<op>.h), with device pointers, checks the shapes it supports
// and enqueues on `stream`. T is float or __nv_bfloat16; math is float32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace loom::kernels::cuda {

template <typename T>
void Embedding(const EmbeddingParams<T>& p, cudaStream_t stream);

template <typename T>
void RmsNorm(const RmsNormParams<T>& p, cudaStream_t stream);

template <typename T>
void RopeKvWrite(const RopeKvWriteParams<T>& p, cudaStream_t stream);

template <typename T>
void SiluMul(const SiluMulParams<T>& p, cudaStream_t stream);

// Decodes (one query token per sequence) with partition_size > 0 run the
// split-K kernel and its reduce; every other step runs one pass per token with
// an online softmax over its whole context. head_dim 16, 32, 64 or 128; at most
// 8 query heads per kv head.
template <typename T>
void PagedAttention(const PagedAttentionParams<T>& p, cudaStream_t stream);

// The split-K partition size for a decode batch of this size: enough (kv head,
// sequence, partition) blocks to cover an H200's 132 SMs a few times at 1k
// context, while long partitions keep the reduce small.
inline int32_t DecodePartitionSize(int32_t batch) {
  if (batch <= 4) return 64;
  if (batch <= 16) return 128;
  if (batch <= 64) return 256;
  return 512;
}

// bf16 linear layer through cuBLASLt (fp32 accumulation), bias added after.
void Matmul(const MatmulParams<__nv_bfloat16>& p, ::loom::cuda::Gemm& gemm, cudaStream_t stream);

}  // namespace loom::kernels::cuda
