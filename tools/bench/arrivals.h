// When each request of a `loom bench` run is sent: a Poisson process at a given
// rate (exponential gaps), or everything at once for an infinite rate. Seeded
// with a generator whose output the C++ standard fixes, so a seed means the
// same schedule everywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::bench {

// Offsets in seconds from the start of the run, non-decreasing; the first
// request goes at 0. rate <= 0 or infinite: all zeros.
std::vector<double> PoissonArrivals(int num_requests, double rate, uint64_t seed);

}  // namespace loom::bench
