#include "model/executor_factory.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/cpu_executor.h"
#if defined(LOOM_HAVE_CUDA)
#include "model/cuda_executor.h"
#endif

namespace loom {

#if defined(LOOM_HAVE_CUDA)
absl::StatusOr<CudaExecutorOptions> CudaOptionsFrom(const ExecutorOptions& options) {
  if (options.dtype != "auto" && options.dtype != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", options.dtype, " unsupported on cuda (bfloat16 only)"));
  }
  absl::StatusOr<kernels::cuda::AttentionKernel> attention =
      ParseAttentionKernel(options.attention_kernel);
  if (!attention.ok()) return attention.status();
  CudaExecutorOptions cuda;
  cuda.attention_kernel = *attention;
  cuda.block_size = options.block_size;
  cuda.max_model_len = options.max_model_len;
  cuda.kv_cache_bytes = options.kv_cache_bytes;
  cuda.kv_cache_memory_fraction = static_cast<float>(options.kv_cache_memory_fraction);
  cuda.max_num_seqs = options.max_num_seqs;
  cuda.max_num_batched_tokens = options.max_num_batched_tokens;
  cuda.max_logit_bias = options.max_logit_bias;
  return cuda;
}

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const LoadedModel& model,
                                                             const ExecutorOptions& options) {
  absl::StatusOr<CudaExecutorOptions> cuda = CudaOptionsFrom(options);
  if (!cuda.ok()) return cuda.status();
  return CreateCudaExecutor(model, *cuda);
}
#endif

absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(const LoadedModel& model,
                                                         const ExecutorOptions& options) {
  std::string device = options.device;
  if (device == "auto") {
#if defined(LOOM_HAVE_CUDA)
    device = CudaDeviceUsable() ? "cuda" : "cpu";
#else
    device = "cpu";
#endif
    std::fprintf(stderr, "executor: device auto -> %s\n", device.c_str());
  }
  if (device == "cpu") {
    absl::StatusOr<std::unique_ptr<CpuExecutor>> cpu = CpuExecutor::Create(model, options);
    if (!cpu.ok()) return cpu.status();
    return std::unique_ptr<Executor>(*std::move(cpu));
  }
  if (device == "cuda") {
#if defined(LOOM_HAVE_CUDA)
    return CreateCudaExecutor(model, options);
#else
    return absl::FailedPreconditionError("this build of Loom has no CUDA backend");
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device ", device, " (auto, cpu, cuda)"));
}

}  // namespace loom
