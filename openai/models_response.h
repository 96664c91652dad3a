// GET /v1/models: {"object": "list", "data": [{"id", "object": "model",
// "created", "owned_by", "root", "max_model_len"}]}, one entry per served model.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "loom/v1/generation.pb.h"

namespace loom::openai {

inline constexpr char kModelOwner[] = "loom";

// `created` (Unix seconds) is when the models were loaded.
std::string RenderModelList(std::span<const v1::ModelInfo> models, int64_t created);

}  // namespace loom::openai
