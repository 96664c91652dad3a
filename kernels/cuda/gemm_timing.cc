#include "kernels/cuda/gemm_timing.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace loom::cuda {
namespace {

absl::Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// The two events of a timed run, destroyed on every path.
class EventPair {
 public:
  EventPair() = default;
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  absl::Status Create() {
    if (absl::Status s = CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"); !s.ok()) {
      return s;
    }
    return CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

cublasStatus_t RunOnce(const GemmCall& c, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(c.handle, c.desc, &alpha, c.a_ptr, c.a, c.b_ptr, c.b, &beta, c.c_ptr, c.c,
                        c.c_ptr, c.c, &algo, c.workspace, c.workspace_bytes, stream);
}

// Mean milliseconds of one candidate, or -1 when cuBLASLt refuses it.
absl::StatusOr<float> TimeOne(const GemmCall& call, const cublasLtMatmulAlgo_t& algo,
                              cudaStream_t stream, int reps, const EventPair& events) {
  if (RunOnce(call, algo, stream) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  if (absl::Status s = CudaStatus(cudaEventRecord(events.start(), stream), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  for (int r = 0; r < reps; ++r) {
    if (RunOnce(call, algo, stream) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  }
  if (absl::Status s = CudaStatus(cudaEventRecord(events.stop(), stream), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus(cudaEventSynchronize(events.stop()), "cudaEventSynchronize");
      !s.ok()) {
    return s;
  }
  float ms = 0.0f;
  if (absl::Status s = CudaStatus(cudaEventElapsedTime(&ms, events.start(), events.stop()),
                                  "cudaEventElapsedTime");
      !s.ok()) {
    return s;
  }
  return ms / static_cast<float>(reps);
}

}  // namespace

int FastestIndex(const std::vector<float>& ms) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(ms.size()); ++i) {
    if (ms[i] >= 0.0f && (best < 0 || ms[i] < ms[best])) best = i;
  }
  return best;
}

absl::StatusOr<int> FastestGemmAlgorithm(const GemmCall& call,
                                         const std::vector<cublasLtMatmulAlgo_t>& candidates,
                                         cudaStream_t stream, int reps) {
  if (candidates.empty() || reps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gemm timing needs candidates (got ",
                                                   candidates.size(), ") and reps >= 1 (got ", reps,
                                                   ")"));
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (absl::Status s = CudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
      !s.ok()) {
    return s;
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return absl::FailedPreconditionError("gemm timing while the stream is being captured");
  }
  EventPair events;
  LOOM_RETURN_IF_ERROR(events.Create());
  std::vector<float> ms;
  for (const cublasLtMatmulAlgo_t& algo : candidates) {
    absl::StatusOr<float> t = TimeOne(call, algo, stream, reps, events);
    if (!t.ok()) return t.status();
    ms.push_back(*t);
  }
  const int best = FastestIndex(ms);
  if (best < 0) return absl::InternalError("gemm timing: cuBLASLt ran none of the candidates");
  return best;
}

}  // namespace loom::cuda
