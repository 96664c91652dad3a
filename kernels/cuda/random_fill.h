// Fills device buffers with reproducible pseudo-random bf16 values, on the
// device: dummy weights of an 8B model (16 GB) are made in milliseconds
// instead of being generated on the host and copied.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace loom::cuda {

// data[i] = uniform in [-scale, scale), a function of (seed, i) only.
absl::Status RandomFillBFloat16(cudaStream_t stream, __nv_bfloat16* data, int64_t n, float scale,
                                uint64_t seed);
// data[i] = value.
absl::Status FillBFloat16(cudaStream_t stream, __nv_bfloat16* data, int64_t n, float value);

}  // namespace loom::cuda
