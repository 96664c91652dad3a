// Launchers of the CUDA op set. Each takes the params struct its CPU reference
// takes (kernels/<op>.h), with device pointers, checks the shapes it supports
// and enqueues on `stream`; a bad shape is INVALID_ARGUMENT, a failed launch
// INTERNAL. T is float or __nv_bfloat16; math is float32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/embedding.h"
#include "kernels/launch_sizing.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace loom::kernels::cuda {

using ::loom::kernels::DecodePartitionSize;

template <typename T>
absl::Status Embedding(const EmbeddingParams<T>& p, cudaStream_t stream);

template <typename T>
absl::Status RmsNorm(const RmsNormParams<T>& p, cudaStream_t stream);

// head_dim up to 512.
template <typename T>
absl::Status HeadRmsNorm(const HeadRmsNormParams<T>& p, cudaStream_t stream);

template <typename T>
absl::Status RopeKvWrite(const RopeKvWriteParams<T>& p, cudaStream_t stream);

template <typename T>
absl::Status SiluMul(const SiluMulParams<T>& p, cudaStream_t stream);
template <typename T>
absl::Status GeluTanhMul(const SiluMulParams<T>& p, cudaStream_t stream);

// Decodes (one query token per sequence) with partition_size > 0 run the
// split-K kernel and its reduce; every other step runs one pass per token with
// an online softmax over its whole context (or its sliding window). head_dim
// 16, 32, 64 or 128 with at most 8 query heads per kv head, or 256 (bf16)
// with at most 4.
template <typename T>
absl::Status PagedAttention(const PagedAttentionParams<T>& p, cudaStream_t stream);

// bf16 linear layer through cuBLASLt (fp32 accumulation), bias added after.
absl::Status Matmul(const MatmulParams<__nv_bfloat16>& p, ::loom::cuda::Gemm& gemm,
                    cudaStream_t stream);

}  // namespace loom::kernels::cuda
