// Reads the sampling defaults a model ships (types/generation_defaults.h):
// the sampling keys of a Hugging Face generation_config.json, or a GGUF's
// general.sampling.* keys, which llama.cpp's converter writes from it.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "formats/gguf_file.h"
#include "types/generation_defaults.h"

namespace loom {

// The JSON object's temperature, top_p, top_k, min_p, repetition_penalty and
// max_new_tokens (max_tokens); vLLM reads the same keys. With strict (the
// --override_generation_config flag) the object may also give max_tokens,
// presence_penalty and frequency_penalty, and any other key or a value of the
// wrong type is an error naming it; otherwise (a model's file) other keys
// are ignored, as are nulls. HF's top_k 0 and vLLM's -1 both mean off.
absl::StatusOr<GenerationDefaults> GenerationDefaultsFromJson(std::string_view text, bool strict);

// general.sampling.{temp, top_p, top_k, min_p, penalty_repeat}.
GenerationDefaults GenerationDefaultsFromGguf(const GgufFile& gguf);

}  // namespace loom
