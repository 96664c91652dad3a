// Run-time CPU feature detection, so one binary picks the widest SIMD path the
// machine has (AVX-512, AVX2+FMA, or portable C++).
#pragma once

namespace loom::kernels::cpu {

// Ordered: each level implies the ones before it.
enum class SimdLevel { kScalar, kAvx2, kAvx512 };

// Detected once; LOOM_SIMD=scalar|avx2 in the environment caps it, to compare
// paths in benchmarks. Kernels with several paths also take an explicit level.
SimdLevel DetectedSimd();
const char* SimdName(SimdLevel level);

}  // namespace loom::kernels::cpu
