#include "tools/bench/arrivals.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace loom::bench {

std::vector<double> PoissonArrivals(int num_requests, double rate, uint64_t seed) {
  std::vector<double> offsets(static_cast<size_t>(std::max(num_requests, 0)), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return offsets;
  std::mt19937_64 rng(seed);
  double t = 0;
  for (size_t i = 1; i < offsets.size(); ++i) {
    // 53 random bits -> u in [0, 1); the gap is the inverse CDF of Exp(rate).
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    t += -std::log1p(-u) / rate;
    offsets[i] = t;
  }
  return offsets;
}

}  // namespace loom::bench
