// bf16 GEMMs through cuBLASLt with fp32 accumulation: y[M,N] = x[M,K] W[N,K]^T
// with every matrix row-major, the layout of HF linear weights. One Gemm object
// per stream owner; it caches one algorithm per shape and is graph-capture safe.
// The cuBLASLt handle and workspace are made on the first Run (or Init); every
// failure is an INTERNAL status. By default a shape takes cuBLASLt's first
// heuristic algorithm; with set_algorithms_timed(n > 1) a shape first run
// outside stream capture times up to n heuristic candidates on its operands
// (kernels/cuda/gemm_timing.h) and keeps the fastest. A failed timing is
// reported on stderr and the shape keeps the first algorithm.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom::cuda {

enum class GemmOut { kBFloat16, kFloat32 };

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Creates the handle and the workspace; Run calls it when needed.
  absl::Status Init();
  // Candidates timed for shapes first seen from now on (at most 16); 0 or 1: none.
  void set_algorithms_timed(int32_t n) { algorithms_timed_ = n; }
  // Shapes whose algorithm was chosen by timing.
  int32_t timed_shapes() const { return timed_shapes_; }

  // y = x W^T. Shapes: x [m,k] with row stride ldx, w [n,k] dense, y [m,n]
  // with row stride ldy; all row-major. y is bf16 or fp32 as `out` says.
  absl::Status Run(cudaStream_t stream, const __nv_bfloat16* x, int64_t ldx, const __nv_bfloat16* w,
                   void* y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                   GemmOut out = GemmOut::kBFloat16);
  // Dense operands: ldx = k, ldy = n.
  absl::Status Run(cudaStream_t stream, const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                   int64_t m, int64_t n, int64_t k, GemmOut out = GemmOut::kBFloat16) {
    return Run(stream, x, k, w, y, n, m, n, k, out);
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // The operands are those of the first run of the shape, used for timing.
  absl::StatusOr<const Plan*> GetPlan(cudaStream_t stream, const void* x, const void* w, void* y,
                                      int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy,
                                      GemmOut out);
  // Index of the fastest of `found` candidates, or 0 when timing is off or fails.
  int ChooseAlgorithm(const Plan& plan, const cublasLtMatmulHeuristicResult_t* results, int found,
                      cudaStream_t stream, const void* x, const void* w, void* y);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  int32_t algorithms_timed_ = 0;
  int32_t timed_shapes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int>, Plan> plans_;
};

}  // namespace loom::cuda
