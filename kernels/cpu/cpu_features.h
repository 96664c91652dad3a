// Run-time CPU feature detection, so one binary picks the widest SIMD path the
// machine has (AVX-512, AVX2+FMA, or portable C++).
#pragma once

#include <string>

namespace loom::kernels::cpu {

// Ordered: each level implies the ones before it.
enum class SimdLevel { kScalar, kAvx2, kAvx512 };

// Detected once; LOOM_SIMD=scalar|avx2 in the environment caps it, to compare
// paths in benchmarks. Kernels with several paths also take an explicit level.
SimdLevel DetectedSimd();

// Kernels with loops the compiler vectorises compile one copy per level with
// __attribute__((target(...))) wrappers around an always-inline body and pick
// one with DetectedSimd(). Not target_clones: its ifunc resolvers run before
// sanitizer runtimes initialise and crash TSan builds.
const char* SimdName(SimdLevel level);

// Whether the CPU has AVX-512 VNNI (vpdpwssd, vpdpbusd), whatever LOOM_SIMD
// says: kernels with VNNI variants check it next to the level in use.
bool HasAvx512Vnni();

// The CPU's model name (from /proc/cpuinfo; "unknown" elsewhere) and the
// instruction-set extensions the kernels use that it has, e.g. "avx2 fma f16c
// avx512f avx512bw avx512vl avx512vnni", for start-up lines and --version.
std::string CpuModelName();
std::string CpuFeatureNames();

}  // namespace loom::kernels::cpu
