// What the gRPC service needs from the loaded model: tokenization, the chat
// template and the facts reported by GetModelInfo. loomd backs it with the real
// model (LoadedModelFrontend); tests back it with a small fake.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loom/v1/generation.pb.h"

namespace loom {

class ModelFrontend {
 public:
  virtual ~ModelFrontend() = default;

  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const = 0;
  // The messages as prompt text, with the generation prompt appended.
  // INVALID_ARGUMENT when the template rejects them, FAILED_PRECONDITION when
  // the model has no usable chat template.
  virtual absl::StatusOr<std::string> RenderChat(const v1::ChatMessages& messages) const = 0;
  // The text of token ids (special tokens included), for /detokenize and the
  // OpenAI logprobs' token strings.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
  // The vocabulary string of a token, for TokenizeResponse.tokens.
  virtual std::string TokenToPiece(int32_t id) const = 0;
  // Fixed once the daemon is ready: vocab_size and max_model_len bound requests.
  virtual const v1::ModelInfo& Info() const = 0;
};

}  // namespace loom
