// Checking macros for CUDA runtime and cuBLAS calls. In the executor path a
// failed call is an absl::Status (INTERNAL, with the call, file and line) that
// the caller returns; the engine then fails its requests. Only tests and
// benchmarks use the aborting LOOM_CUDA_CHECK / LOOM_CUDA_CHECK_OK.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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

inline absl::Status CudaError(const char* what, const char* expr, const char* file, int line) {
  return absl::InternalError(
      absl::StrCat("CUDA call failed at ", file, ":", line, ": ", expr, ": ", what));
}

}  // namespace loom::cuda

// Returns INTERNAL from the enclosing function (absl::Status or StatusOr) when
// a cudaError_t or cublasStatus_t result is not success.
#define LOOM_CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                      \
    auto loom_cuda_result_ = (expr);                                                        \
    if (!::loom::cuda::CudaOk(loom_cuda_result_)) {                                         \
      return ::loom::cuda::CudaError(::loom::cuda::CudaErrorText(loom_cuda_result_), #expr, \
                                     __FILE__, __LINE__);                                   \
    }                                                                                       \
  } while (0)

// After a kernel launch: catches bad launch configurations at their source.
#define LOOM_CUDA_RETURN_IF_LAUNCH_ERROR() LOOM_CUDA_RETURN_IF_ERROR(cudaGetLastError())

// Shape and argument checks of the launchers: INVALID_ARGUMENT naming the check.
#define LOOM_KERNEL_CHECK(cond)                                                         \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      return absl::InvalidArgumentError(                                                \
          absl::StrCat("unsupported shape at ", __FILE__, ":", __LINE__, ": ", #cond)); \
    }                                                                                   \
  } while (0)

// Tests and benchmarks only: abort on a failed CUDA call or a non-OK status.
#define LOOM_CUDA_CHECK(expr)                                                                    \
  do {                                                                                           \
    auto loom_cuda_check_result_ = (expr);                                                       \
    if (!::loom::cuda::CudaOk(loom_cuda_check_result_)) {                                        \
      ::loom::cuda::CudaCheckFailed(::loom::cuda::CudaErrorText(loom_cuda_check_result_), #expr, \
                                    __FILE__, __LINE__);                                         \
    }                                                                                            \
  } while (0)
#define LOOM_CUDA_CHECK_OK(expr)                                                                 \
  do {                                                                                           \
    if (absl::Status loom_status_ = (expr); !loom_status_.ok()) {                                \
      ::loom::cuda::CudaCheckFailed(loom_status_.ToString().c_str(), #expr, __FILE__, __LINE__); \
    }                                                                                            \
  } while (0)
