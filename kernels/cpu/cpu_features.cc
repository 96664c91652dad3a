#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace loom::kernels::cpu {
namespace {

SimdLevel Detect() {
  SimdLevel level = SimdLevel::kScalar;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = SimdLevel::kAvx2;
  if (level == SimdLevel::kAvx2 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    level = SimdLevel::kAvx512;
  }
#endif
  const char* cap = std::getenv("LOOM_SIMD");
  if (cap != nullptr) {
    if (std::strcmp(cap, "scalar") == 0) level = SimdLevel::kScalar;
    if (std::strcmp(cap, "avx2") == 0 && level > SimdLevel::kAvx2) level = SimdLevel::kAvx2;
  }
  return level;
}

}  // namespace

SimdLevel DetectedSimd() {
  static const SimdLevel level = Detect();
  return level;
}

const char* SimdName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace loom::kernels::cpu
