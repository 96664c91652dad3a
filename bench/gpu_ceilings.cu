// Device ceilings measured in the same run as every other GPU figure: the
// device-to-device copy bandwidth (bytes read + written) and the FLOP/s of a
// large bf16 GEMM through the same cuBLASLt wrapper the model uses.
// Prints "key value" lines; exit 0 without a GPU unless LOOM_REQUIRE_GPU=1.
#include <cuda_bf16.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/gpu_timing.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/random_fill.h"

int main() {
  if (!loom::bench::DeviceAvailable()) {
    const char* require = std::getenv("LOOM_REQUIRE_GPU");
    return require != nullptr && std::strcmp(require, "1") == 0 ? 1 : 0;
  }
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreate(&stream));

  // Copy: 4 GiB per direction, far beyond the 60 MB L2.
  const size_t copy_bytes = size_t{4} << 30;
  void *src = nullptr, *dst = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&src, copy_bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&dst, copy_bytes));
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, static_cast<__nv_bfloat16*>(src),
                                                    copy_bytes / 2, 1.0f, 1));
  const double copy_ms = loom::bench::MedianMs(stream, 3, 20, [&](cudaStream_t s) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s));
  });
  const double copy_bw = 2.0 * copy_bytes / (copy_ms * 1e-3);
  LOOM_CUDA_CHECK(cudaFree(src));
  LOOM_CUDA_CHECK(cudaFree(dst));

  // GEMM: 8192^3 on random data (zeros run faster and would flatter the ceiling).
  const int64_t n = 8192;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&a, n * n * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&b, n * n * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&c, n * n * 2));
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, a, n * n, 1.0f, 2));
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, b, n * n, 1.0f, 3));
  loom::cuda::Gemm gemm;
  const double gemm_ms = loom::bench::MedianMs(
      stream, 3, 20, [&](cudaStream_t s) { LOOM_CUDA_CHECK_OK(gemm.Run(s, a, b, c, n, n, n)); });
  const double gemm_flops = 2.0 * n * n * n / (gemm_ms * 1e-3);

  cudaDeviceProp prop{};
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s sms %d l2_bytes %d\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize);
  std::printf("copy: %.3f ms for %zu bytes read+written; gemm: %.3f ms for 8192^3\n", copy_ms,
              2 * copy_bytes, gemm_ms);
  std::printf("RESULT ceilings copy_bytes_per_s=%.4e gemm_bf16_flops=%.4e\n", copy_bw, gemm_flops);
  LOOM_CUDA_CHECK(cudaFree(a));
  LOOM_CUDA_CHECK(cudaFree(b));
  LOOM_CUDA_CHECK(cudaFree(c));
  LOOM_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
