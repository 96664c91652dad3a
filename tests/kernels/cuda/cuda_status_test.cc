// CUDA faults and unsupported shapes in the executor path are statuses, not
// aborts: the checking macros and the launchers' argument checks (which run
// before anything touches a device), and a GEMM on a machine without a GPU.
#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/sampling.h"

namespace loom::kernels::cuda {
namespace {

absl::Status FailingCall() {
  LOOM_CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue);
  return absl::OkStatus();
}

absl::Status FailingCublasCall() {
  LOOM_CUDA_RETURN_IF_ERROR(CUBLAS_STATUS_NOT_INITIALIZED);
  return absl::OkStatus();
}

TEST(CudaStatusTest, FailedCallsAreInternalNamingTheCall) {
  const absl::Status status = FailingCall();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("cudaErrorInvalidValue"), absl::string_view::npos);
  EXPECT_NE(status.message().find("cuda_status_test.cc"), absl::string_view::npos);
  EXPECT_EQ(FailingCublasCall().code(), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, UnsupportedShapesAreInvalidArgument) {
  PagedAttentionParams<__nv_bfloat16> ap;
  ap.num_heads = 32;
  ap.kv.num_kv_heads = 2;  // 16 query heads per kv head: more than the kernel holds
  EXPECT_EQ(PagedAttention(ap, nullptr).code(), absl::StatusCode::kInvalidArgument);
  RmsNormParams<__nv_bfloat16> rn;
  rn.hidden = 7;  // not a whole number of 16-byte vectors
  EXPECT_EQ(RmsNorm(rn, nullptr).code(), absl::StatusCode::kInvalidArgument);
  SamplingGpuParams sp;
  sp.vocab_size = 0;
  EXPECT_EQ(Sample(sp, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaStatusTest, GemmWithoutADeviceFailsWithAStatus) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    GTEST_SKIP() << "a device is present";
  }
  cudaGetLastError();
  ::loom::cuda::Gemm gemm;
  const absl::Status status = gemm.Run(nullptr, nullptr, nullptr, nullptr, 4, 4, 4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
}

}  // namespace
}  // namespace loom::kernels::cuda
