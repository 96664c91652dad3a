#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

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

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

bool HasAvx512Vnni() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512vnni") != 0;
  return yes;
#else
  return false;
#endif
}

std::string CpuFeatureNames() {
  std::string out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const std::pair<const char*, bool> features[] = {
      {"avx2", __builtin_cpu_supports("avx2") != 0},
      {"fma", __builtin_cpu_supports("fma") != 0},
      {"avx512f", __builtin_cpu_supports("avx512f") != 0},
      {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
      {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
      {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0},
      {"avx512vbmi", __builtin_cpu_supports("avx512vbmi") != 0},
  };
  for (const auto& [name, has] : features) {
    if (!has) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
#endif
  return out.empty() ? "none" : out;
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
