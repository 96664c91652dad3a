// Main of the GPU test binaries. Without a device every case skips and the
// binary passes; with LOOM_REQUIRE_GPU=1 (set by bench/gpu.sh) a missing
// device fails each case, and a run in which no GPU case executed fails.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"
#include "tests/kernels/cuda/gpu_test_util.h"

namespace loom::testing {
namespace {

std::atomic<int> gpu_cases{0};

}  // namespace

bool GpuAvailable() {
  static const bool available = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      return false;
    }
    return true;
  }();
  return available;
}

bool GpuRequired() {
  const char* v = std::getenv("LOOM_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void CountGpuCase() { ++gpu_cases; }

}  // namespace loom::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0 && loom::testing::GpuRequired() && loom::testing::gpu_cases.load() == 0) {
    std::fprintf(stderr, "LOOM_REQUIRE_GPU=1 but no GPU test case executed\n");
    return 1;
  }
  std::printf("GPU cases executed: %d\n", loom::testing::gpu_cases.load());
  return rc;
}
