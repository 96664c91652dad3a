#include "openai/models_response.h"

#include "openai/response_json.h"

namespace loom::openai {

std::string RenderModelList(std::span<const v1::ModelInfo> models, int64_t created) {
  nlohmann::json data = nlohmann::json::array();
  for (const v1::ModelInfo& model : models) {
    data.push_back({{"id", model.name()},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", kModelOwner},
                    {"root", model.name()},
                    {"max_model_len", model.max_model_len()},
                    {"vocab_size", model.vocab_size()}});
  }
  return Dump({{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace loom::openai
