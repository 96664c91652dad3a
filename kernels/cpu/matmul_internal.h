// The SIMD paths of the CPU matmul, exposed so tests can run each one on the
// same machine; production code calls Matmul, which picks DetectedSimd().
#pragma once

#include "kernels/cpu/cpu_features.h"
#include "kernels/matmul.h"

namespace loom::kernels::cpu {

void MatmulWithSimd(const MatmulParams<float>& p, ParallelFor& pool, SimdLevel level);

// The whole product on the calling thread (a building block for other
// kernels' parallel tasks).
void MatmulSerial(const MatmulParams<float>& p, SimdLevel level);

}  // namespace loom::kernels::cpu
