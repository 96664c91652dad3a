#include "scheduler/request.h"

namespace loom {

uint64_t DeriveSampleSeed(uint64_t seed, uint32_t index) {
  if (index == 0) {
    return seed;
  }
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * index;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace loom
