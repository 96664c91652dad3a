// Host-side parts of the cuBLASLt algorithm timing: choosing the fastest of
// the candidates that ran, and the arguments it refuses before any CUDA call.
#include "kernels/cuda/gemm_timing.h"

#include "gtest/gtest.h"

namespace loom::cuda {
namespace {

TEST(GemmTiming, FastestIndexSkipsCandidatesThatDidNotRun) {
  EXPECT_EQ(FastestIndex({0.5f, 0.2f, 0.9f}), 1);
  EXPECT_EQ(FastestIndex({-1.0f, 0.7f, 0.3f, -1.0f}), 2);
  EXPECT_EQ(FastestIndex({0.4f, 0.4f}), 0);  // a tie keeps the heuristic's order
  EXPECT_EQ(FastestIndex({-1.0f, -1.0f}), -1);
  EXPECT_EQ(FastestIndex({}), -1);
}

TEST(GemmTiming, RefusesNoCandidatesAndNoRepetitions) {
  const GemmCall call;
  absl::StatusOr<int> none = FastestGemmAlgorithm(call, {}, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("candidates"), std::string::npos);
  absl::StatusOr<int> no_reps = FastestGemmAlgorithm(call, {cublasLtMatmulAlgo_t{}}, nullptr, 0);
  ASSERT_FALSE(no_reps.ok());
  EXPECT_EQ(no_reps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_reps.status().message().find("reps"), std::string::npos);
}

}  // namespace
}  // namespace loom::cuda
