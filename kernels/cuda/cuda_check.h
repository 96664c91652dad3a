// The one checking macro for CUDA runtime and cuBLAS calls: a failed call is a
// broken invariant of the GPU backend, reported with file and line, then abort.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

namespace loom::cuda {

[[noreturn]] inline void CudaCheckFailed(const char* what, const char* expr, const char* file,
                                         int line) {
  std::fprintf(stderr, "%s:%d: CUDA check failed: %s: %s\n", file, line, expr, what);
  std::abort();
}

inline const char* CudaErrorText(cudaError_t e) { return cudaGetErrorString(e); }
inline const char* CudaErrorText(cublasStatus_t s) { return cublasGetStatusString(s); }
inline bool CudaOk(cudaError_t e) { return e == cudaSuccess; }
inline bool CudaOk(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

}  // namespace loom::cuda

// Works for cudaError_t and cublasStatus_t results alike.
#define LOOM_CUDA_CHECK(expr)                                                                    \
  do {                                                                                           \
    auto loom_cuda_check_result_ = (expr);                                                       \
    if (!::loom::cuda::CudaOk(loom_cuda_check_result_)) {                                        \
      ::loom::cuda::CudaCheckFailed(::loom::cuda::CudaErrorText(loom_cuda_check_result_), #expr, \
                                    __FILE__, __LINE__);                                         \
    }                                                                                            \
  } while (0)

// After a kernel launch: catches bad launch configurations at their source.
#define LOOM_CUDA_CHECK_LAUNCH() LOOM_CUDA_CHECK(cudaGetLastError())

// Shape and argument checks of the launchers: a caller passing an unsupported
// shape is a bug in the caller.
#define LOOM_KERNEL_CHECK(cond)                                                                 \
  do {                                                                                          \
    if (!(cond)) ::loom::cuda::CudaCheckFailed("unsupported shape", #cond, __FILE__, __LINE__); \
  } while (0)
