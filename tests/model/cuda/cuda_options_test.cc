// The engine's executor options reach the CUDA executor's (no device needed).
#include "gtest/gtest.h"
#include "model/cuda_executor.h"

namespace loom {
namespace {

TEST(CudaOptionsTest, StepLimitsAndLogitBiasCarryOver) {
  ExecutorOptions options;
  options.block_size = 32;
  options.max_model_len = 4096;
  options.kv_cache_bytes = int64_t{1} << 30;
  options.max_num_seqs = 48;
  options.max_num_batched_tokens = 2048;
  options.max_logit_bias = 300;
  absl::StatusOr<CudaExecutorOptions> cuda = CudaOptionsFrom(options);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->block_size, 32);
  EXPECT_EQ(cuda->max_model_len, 4096);
  EXPECT_EQ(cuda->kv_cache_bytes, int64_t{1} << 30);
  EXPECT_EQ(cuda->max_num_seqs, 48);
  EXPECT_EQ(cuda->max_num_batched_tokens, 2048);
  EXPECT_EQ(cuda->max_logit_bias, 300);
}

TEST(CudaOptionsTest, OnlyBfloat16IsSupported) {
  ExecutorOptions options;
  options.dtype = "float32";
  const absl::Status status = CudaOptionsFrom(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("float32"), absl::string_view::npos);
}

}  // namespace
}  // namespace loom
