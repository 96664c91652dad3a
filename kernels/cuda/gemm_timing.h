// Start-up choice among cuBLASLt's heuristic algorithms for one GEMM shape:
// each candidate runs on the shape's real operands and the fastest is kept.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::cuda {

// One matmul as Gemm issues it: D = C = c_ptr, alpha 1, beta 0.
struct GemmCall {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  const void* a_ptr = nullptr;
  const void* b_ptr = nullptr;
  void* c_ptr = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Index of the smallest time, ignoring negative entries (candidates that did
// not run); -1 when none ran.
int FastestIndex(const std::vector<float>& ms);

// Runs each candidate once to warm up, then `reps` times between two events
// on `stream`, and returns the index of the fastest. A candidate cuBLASLt
// refuses is skipped. INVALID_ARGUMENT for no candidates or reps < 1,
// FAILED_PRECONDITION while `stream` is being captured, INTERNAL when a CUDA
// call fails or no candidate ran; the message names the call.
absl::StatusOr<int> FastestGemmAlgorithm(const GemmCall& call,
                                         const std::vector<cublasLtMatmulAlgo_t>& candidates,
                                         cudaStream_t stream, int reps = 5);

}  // namespace loom::cuda
