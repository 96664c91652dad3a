// Hugging Face safetensors checkpoints: one model.safetensors or shards listed
// in model.safetensors.index.json; bf16, fp16 and fp32 tensors, memory-mapped.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "model/weights.h"

namespace loom {

// Adds every tensor of one .safetensors file to `store` (which keeps the
// mapping alive). Headers and offsets are bounds-checked.
absl::Status LoadSafetensorsFile(const std::string& path, WeightStore& store);

// A model directory: model.safetensors.index.json (sharded) or
// model.safetensors, or else every *.safetensors file in it.
absl::StatusOr<std::unique_ptr<WeightStore>> LoadSafetensorsDir(const std::string& dir);

}  // namespace loom
