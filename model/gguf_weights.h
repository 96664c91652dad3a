// GGUF tensors -> a WeightStore under Hugging Face names, with the Q/K rows
// that llama.cpp's converter permuted for interleaved RoPE put back into HF's
// half-split order.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "formats/gguf_file.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

absl::StatusOr<std::unique_ptr<WeightStore>> LoadGgufWeights(const GgufFile& gguf,
                                                             const ModelConfig& config);

// The row order of a Q or K projection [n_heads * head_dim, in]: GGUF row
// `r` of head h holds HF row UnpermuteRow(r). Exposed for tests.
int64_t GgufRowToHfRow(int64_t row, int32_t head_dim);

}  // namespace loom
