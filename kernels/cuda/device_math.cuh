// Small device helpers shared by the kernels: float conversion of the storage
// types, 16-byte vector loads and warp/block reductions.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

namespace loom::kernels::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// kVec elements of T in one 16-byte access.
template <typename T>
struct Vec16 {
  static constexpr int kVec = 16 / sizeof(T);
  uint4 raw;
  __device__ __forceinline__ void Load(const T* p) { raw = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ void Store(T* p) const { *reinterpret_cast<uint4*>(p) = raw; }
  __device__ __forceinline__ float Get(int i) const {
    return ToFloat(reinterpret_cast<const T*>(&raw)[i]);
  }
  __device__ __forceinline__ void Set(int i, float v) {
    reinterpret_cast<T*>(&raw)[i] = FromFloat<T>(v);
  }
};

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = (blockDim.x + 31) / 32;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = (blockDim.x + 31) / 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : -FLT_MAX;
  return WarpMax(v);
}

}  // namespace loom::kernels::cuda
