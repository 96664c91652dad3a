// A ModelFrontend for server tests: one token per byte (id = byte value),
// BOS = 256 and EOS = 257 in a vocabulary of 300, and a plain-text chat
// template ("role: content\n" per turn, then "assistant: ").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "loom/v1/generation.pb.h"
#include "server/model_frontend.h"

namespace loom::testing {

class FakeModelFrontend final : public ModelFrontend {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kVocabSize = 300;

  explicit FakeModelFrontend(uint32_t max_model_len = 64) {
    info_.set_name("fake");
    info_.set_architecture("LlamaForCausalLM");
    info_.set_vocab_size(kVocabSize);
    info_.set_max_model_len(max_model_len);
    info_.set_eos_token_id(257);
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int32_t> ids;
    if (add_special_tokens) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }

  absl::StatusOr<std::string> RenderChat(const v1::ChatMessages& messages) const override {
    std::string text;
    for (const v1::ChatMessage& m : messages.messages()) {
      absl::StrAppend(&text, m.role(), ": ", m.content(), "\n");
    }
    return text + "assistant: ";
  }

  std::string Decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (int32_t id : ids) text += TokenToPiece(id);
    return text;
  }

  std::string TokenToPiece(int32_t id) const override {
    if (id < 256) return std::string(1, static_cast<char>(id));
    return absl::StrCat("<", id, ">");
  }

  const v1::ModelInfo& Info() const override { return info_; }

 private:
  v1::ModelInfo info_;
};

}  // namespace loom::testing
