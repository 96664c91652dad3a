// Random weights of a config's shape (deterministic seed), for benchmarks and
// tests that need a model of a given size but not its outputs.
#pragma once

#include <cstdint>
#include <memory>

#include "model/config.h"
#include "model/weights.h"

namespace loom {

// dtype: kBF16 or kF32. Linear weights ~ U(-a, a) with a = 1/sqrt(in), norms 1.
std::unique_ptr<WeightStore> MakeDummyWeights(const ModelConfig& config, DType dtype,
                                              uint64_t seed = 0);

}  // namespace loom
