#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_timing.h"

namespace loom::cuda {
namespace {

// cuBLASLt recommends 32 MiB on Hopper for its split-K and stream-K kernels.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxTimed = 16;

}  // namespace

Gemm::Gemm() : workspace_bytes_(kWorkspaceBytes) {}

absl::Status Gemm::Init() {
  if (handle_ == nullptr) LOOM_CUDA_RETURN_IF_ERROR(cublasLtCreate(&handle_));
  if (workspace_ == nullptr) LOOM_CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace_, workspace_bytes_));
  return absl::OkStatus();
}

Gemm::~Gemm() {
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

// Row-major y[m,n] is column-major y^T[n,m] = W x^T: cuBLAS's A is W read
// transposed (column-major [k,n]), its B is x (column-major [k,m]).
absl::StatusOr<const Gemm::Plan*> Gemm::GetPlan(cudaStream_t stream, const void* x, const void* w,
                                                void* y, int64_t m, int64_t n, int64_t k,
                                                int64_t ldx, int64_t ldy, GemmOut out) {
  const auto key = std::make_tuple(m, n, k, ldx, ldy, static_cast<int>(out));
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan plan;
  const cudaDataType_t c_type = out == GemmOut::kFloat32 ? CUDA_R_32F : CUDA_R_16BF;
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                           &trans_a, sizeof(trans_a)));
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                           &trans_b, sizeof(trans_b)));
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, ldx));
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.c, c_type, n, m, ldy));

  cublasLtMatmulPreference_t pref;
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  const int requested = std::clamp(algorithms_timed_, 1, kMaxTimed);
  std::vector<cublasLtMatmulHeuristicResult_t> results(requested);
  int found = 0;
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(
      handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, requested, results.data(), &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    return CudaError("no algorithm", "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  plan.algo = results[ChooseAlgorithm(plan, results.data(), found, stream, x, w, y)].algo;
  return &plans_.emplace(key, plan).first->second;
}

int Gemm::ChooseAlgorithm(const Plan& plan, const cublasLtMatmulHeuristicResult_t* results,
                          int found, cudaStream_t stream, const void* x, const void* w, void* y) {
  if (found <= 1) return 0;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  for (int i = 0; i < found; ++i) candidates.push_back(results[i].algo);
  GemmCall call;
  call.handle = handle_;
  call.desc = plan.desc;
  call.a = plan.a;
  call.b = plan.b;
  call.c = plan.c;
  call.a_ptr = w;
  call.b_ptr = x;
  call.c_ptr = y;
  call.workspace = workspace_;
  call.workspace_bytes = workspace_bytes_;
  absl::StatusOr<int> best = FastestGemmAlgorithm(call, candidates, stream);
  if (!best.ok()) {
    std::fprintf(stderr, "gemm: timing %d algorithms failed (%s); keeping the heuristic's first\n",
                 found, std::string(best.status().message()).c_str());
    return 0;
  }
  ++timed_shapes_;
  return *best;
}

absl::Status Gemm::Run(cudaStream_t stream, const __nv_bfloat16* x, int64_t ldx,
                       const __nv_bfloat16* w, void* y, int64_t ldy, int64_t m, int64_t n,
                       int64_t k, GemmOut out) {
  if (m == 0) return absl::OkStatus();
  LOOM_RETURN_IF_ERROR(Init());
  absl::StatusOr<const Plan*> found = GetPlan(stream, x, w, y, m, n, k, ldx, ldy, out);
  if (!found.ok()) return found.status();
  const Plan& plan = **found;
  const float alpha = 1.0f, beta = 0.0f;
  LOOM_CUDA_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta,
                                           y, plan.c, y, plan.c, &plan.algo, workspace_,
                                           workspace_bytes_, stream));
  return absl::OkStatus();
}

}  // namespace loom::cuda
