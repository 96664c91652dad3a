// Qualifiers that let the plain kernel parameter structs and small inline
// helpers compile both as host C++ and as CUDA device code (nvcc, C++17).
#pragma once

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif
