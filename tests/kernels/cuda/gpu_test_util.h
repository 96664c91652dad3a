// Helpers of the GPU tests: skipping without a device (a failure instead when
// LOOM_REQUIRE_GPU=1), device buffers with poisoned guard regions on both
// sides, bf16 rounding of host data and the tolerance check
// |got - ref| <= atol + rtol * |ref| with NaN/Inf rejected.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"

namespace loom::testing {

bool GpuAvailable();
bool GpuRequired();
// Counts the GPU cases that ran on a device (checked by the test main).
void CountGpuCase();

#define LOOM_REQUIRE_GPU_OR_SKIP()                                                         \
  do {                                                                                     \
    if (!::loom::testing::GpuAvailable()) {                                                \
      if (::loom::testing::GpuRequired()) GTEST_FAIL() << "LOOM_REQUIRE_GPU=1 but no GPU"; \
      GTEST_SKIP() << "no CUDA device";                                                    \
    }                                                                                      \
    ::loom::testing::CountGpuCase();                                                       \
  } while (0)

// Tolerances per storage type. bf16 keeps 8 significant bits (relative step
// 2^-8); kernels round inputs and outputs once each and accumulate in fp32.
template <typename T>
struct Tolerance;
template <>
struct Tolerance<float> {
  static constexpr float kAtol = 1e-4f, kRtol = 1e-4f;
};
template <>
struct Tolerance<__nv_bfloat16> {
  static constexpr float kAtol = 2e-2f, kRtol = 2e-2f;
};

inline float ToHost(float x) { return x; }
inline float ToHost(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
T FromHost(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return __float2bfloat16(x);
  }
}

// Values exactly representable in T, so that CPU and GPU see the same inputs.
template <typename T>
std::vector<float> RandomValues(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = ToHost(FromHost<T>(dist(rng)));
  return v;
}

// A device array of n elements between two guard regions poisoned with 0xFF
// bytes (NaN in float and bf16); the payload starts poisoned too.
template <typename T>
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 256;
  explicit GuardedBuffer(size_t n) : n_(n) {
    LOOM_CUDA_CHECK(cudaMalloc(&base_, (n + 2 * kGuard) * sizeof(T)));
    LOOM_CUDA_CHECK(cudaMemset(base_, 0xFF, (n + 2 * kGuard) * sizeof(T)));
  }
  explicit GuardedBuffer(const std::vector<float>& host) : GuardedBuffer(host.size()) {
    Upload(host);
  }
  ~GuardedBuffer() { cudaFree(base_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  T* get() const { return base_ + kGuard; }
  size_t size() const { return n_; }
  void Upload(const std::vector<float>& host) {
    std::vector<T> t(host.size());
    for (size_t i = 0; i < host.size(); ++i) t[i] = FromHost<T>(host[i]);
    LOOM_CUDA_CHECK(cudaMemcpy(get(), t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<float> Download() const {
    std::vector<T> t(n_);
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    LOOM_CUDA_CHECK(cudaMemcpy(t.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n_);
    for (size_t i = 0; i < n_; ++i) out[i] = ToHost(t[i]);
    return out;
  }
  // True when both guard regions still hold only 0xFF bytes.
  bool GuardsIntact() const {
    std::vector<unsigned char> g(kGuard * sizeof(T));
    for (T* at : {base_, base_ + kGuard + n_}) {
      LOOM_CUDA_CHECK(cudaMemcpy(g.data(), at, g.size(), cudaMemcpyDeviceToHost));
      for (unsigned char b : g) {
        if (b != 0xFF) return false;
      }
    }
    return true;
  }

 private:
  T* base_ = nullptr;
  size_t n_;
};

// Device copy of int32 data (no guards: inputs only).
class IntBuffer {
 public:
  explicit IntBuffer(const std::vector<int32_t>& host) {
    LOOM_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(1, host.size()) * 4));
    LOOM_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  }
  ~IntBuffer() { cudaFree(p_); }
  IntBuffer(const IntBuffer&) = delete;
  IntBuffer& operator=(const IntBuffer&) = delete;
  int32_t* get() const { return p_; }

 private:
  int32_t* p_ = nullptr;
};

// Every element finite and within atol + rtol * |ref|; reports the first few.
inline void ExpectNear(const std::vector<float>& got, const std::vector<float>& ref, float atol,
                       float rtol) {
  ASSERT_EQ(got.size(), ref.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    if (!std::isfinite(got[i]) ||
        !(std::fabs(got[i] - ref[i]) <= atol + rtol * std::fabs(ref[i]))) {
      ADD_FAILURE() << "index " << i << ": got " << got[i] << " want " << ref[i];
      ++failures;
    }
  }
}

template <typename T>
void ExpectNear(const std::vector<float>& got, const std::vector<float>& ref) {
  ExpectNear(got, ref, Tolerance<T>::kAtol, Tolerance<T>::kRtol);
}

}  // namespace loom::testing
