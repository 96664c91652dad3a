// Philox4x32-10 counter-based RNG (Salmon et al., SC'11), usable on host and
// device so that the CPU and CUDA samplers draw identical numbers for the same
// (seed, step): a sequence's draw depends on nothing else in the batch.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace loom::kernels {

struct Philox4x32Result {
  uint32_t v[4];
};

LOOM_HOST_DEVICE inline uint32_t PhiloxMulHi(uint32_t a, uint32_t b, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *lo = static_cast<uint32_t>(p);
  return static_cast<uint32_t>(p >> 32);
}

// Ten rounds of Philox4x32 on counter (c0..c3) with key (k0, k1).
LOOM_HOST_DEVICE inline Philox4x32Result Philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2,
                                                       uint32_t c3, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u;
  constexpr uint32_t kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t lo0;
    uint32_t lo1;
    const uint32_t hi0 = PhiloxMulHi(kMul0, c0, &lo0);
    const uint32_t hi1 = PhiloxMulHi(kMul1, c2, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Philox4x32Result{{c0, c1, c2, c3}};
}

// A uniform float in [0, 1) for draw `index` of generation step `step` of the
// sequence seeded with `seed`. 24 random bits: every value is exact in float.
LOOM_HOST_DEVICE inline float PhiloxUniform(uint64_t seed, uint64_t step, uint32_t index) {
  const Philox4x32Result r =
      Philox4x32_10(static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), index, 0u,
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(r.v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace loom::kernels
