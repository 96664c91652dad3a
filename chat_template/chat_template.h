// Chat messages -> prompt text, by interpreting the model's own Jinja chat
// template (the subset that ChatML, Llama 2/3 and Mistral templates use) with
// transformers' settings (trim_blocks, lstrip_blocks). A template outside the
// subset fails at parse or render time with a clear Status, never a crash.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace loom {

struct ChatMessage {
  std::string role;
  std::string content;
};

namespace jinja {
struct Program;
}

class ChatTemplate {
 public:
  // bos_token / eos_token: the strings the template sees under those names.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromJinja(std::string source,
                                                                 std::string bos_token,
                                                                 std::string eos_token);
  ~ChatTemplate();

  // INVALID_ARGUMENT for what the template rejects (raise_exception) and
  // UNIMPLEMENTED for constructs outside the subset.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::unique_ptr<jinja::Program> program_;
};

}  // namespace loom
