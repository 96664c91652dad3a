#include "model/executor_factory.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/cpu_executor.h"
#if defined(LOOM_HAVE_CUDA)
#include "model/cuda_executor.h"
#endif

namespace loom {

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
