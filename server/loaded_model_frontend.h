// ModelFrontend backed by the loaded model: its tokenizer and chat template,
// and the ModelInfo that GetModelInfo reports (model shape plus the engine's
// device, dtype and KV pool, known once the engine has started).
#pragma once

#include <memory>
#include <string>

#include "loom/v1/generation.pb.h"
#include "model/executor.h"
#include "model/model.h"
#include "server/model_frontend.h"

namespace loom {

class LoadedModelFrontend final : public ModelFrontend {
 public:
  // model must outlive the frontend.
  LoadedModelFrontend(const LoadedModel& model, v1::ModelInfo info)
      : model_(model), info_(std::move(info)) {}

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override;
  absl::StatusOr<std::string> RenderChat(const v1::ChatMessages& messages) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string TokenToPiece(int32_t id) const override;
  const v1::ModelInfo& Info() const override { return info_; }

 private:
  const LoadedModel& model_;
  const v1::ModelInfo info_;
};

// What GetModelInfo reports for a model served with this geometry.
v1::ModelInfo DescribeModel(const LoadedModel& model, const ExecutorGeometry& geometry,
                            int32_t max_model_len, const std::string& served_model_name,
                            bool prefix_caching);

}  // namespace loom
