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

Gemm::Gemm() : workspace_bytes_(kWorkspaceBytes) {
  LOOM_CUDA_CHECK(cublasLtCreate(&handle_));
  LOOM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major y[m,n] is column-major y^T[n,m] = W x^T: cuBLAS's A is W read
// transposed (column-major [k,n]), its B is x (column-major [k,m]).
const Gemm::Plan& Gemm::GetPlan(cudaStream_t stream, const void* x, const void* w, void* y,
                                int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy,
                                GemmOut out) {
  const auto key = std::make_tuple(m, n, k, ldx, ldy, static_cast<int>(out));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan plan;
  const cudaDataType_t c_type = out == GemmOut::kFloat32 ? CUDA_R_32F : CUDA_R_16BF;
  LOOM_CUDA_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LOOM_CUDA_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                 sizeof(trans_a)));
  LOOM_CUDA_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                 sizeof(trans_b)));
  LOOM_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  LOOM_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, ldx));
  LOOM_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan.c, c_type, n, m, ldy));

  cublasLtMatmulPreference_t pref;
  LOOM_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  LOOM_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  const int requested = std::clamp(algorithms_timed_, 1, kMaxTimed);
  std::vector<cublasLtMatmulHeuristicResult_t> results(requested);
  int found = 0;
  LOOM_CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                 pref, requested, results.data(), &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    CudaCheckFailed("no algorithm", "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  plan.algo = results[ChooseAlgorithm(plan, results.data(), found, stream, x, w, y)].algo;
  return plans_.emplace(key, plan).first->second;
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

void Gemm::Run(cudaStream_t stream, const __nv_bfloat16* x, int64_t ldx, const __nv_bfloat16* w,
               void* y, int64_t ldy, int64_t m, int64_t n, int64_t k, GemmOut out) {
  if (m == 0) return;
  const Plan& plan = GetPlan(stream, x, w, y, m, n, k, ldx, ldy, out);
  const float alpha = 1.0f, beta = 0.0f;
  LOOM_CUDA_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, y, plan.c,
                                 y, plan.c, &plan.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace loom::cuda
