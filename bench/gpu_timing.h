// Timing helpers shared by the GPU benchmark programs: the median of repeated
// runs measured with CUDA events after warm-up, as METHOD.md asks.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace loom::bench {

// Median milliseconds of fn(stream) over `reps` timed runs after `warmup`.
template <typename Fn>
double MedianMs(cudaStream_t stream, int warmup, int reps, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn(stream);
  cudaEvent_t start, stop;
  LOOM_CUDA_CHECK(cudaEventCreate(&start));
  LOOM_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    LOOM_CUDA_CHECK(cudaEventRecord(start, stream));
    fn(stream);
    LOOM_CUDA_CHECK(cudaEventRecord(stop, stream));
    LOOM_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  LOOM_CUDA_CHECK(cudaEventDestroy(start));
  LOOM_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// True when a CUDA device can run kernels; prints why not otherwise.
inline bool DeviceAvailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    return false;
  }
  return true;
}

}  // namespace loom::bench
