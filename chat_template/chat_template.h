// Chat messages -> prompt text, by interpreting the model's own Jinja chat
// template (the subset that ChatML, Llama 2/3 and Mistral templates use) with
// transformers' settings (trim_blocks, lstrip_blocks). A template outside the
// subset fails at parse or render time with a clear Status, never a crash.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom {

// A function call an assistant turn made, as OpenAI's tool_calls list it.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the text of a JSON object
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool (or what the template knows)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant turns that called functions
  std::string tool_call_id = {};              // tool turns: the call they answer
  std::string name = {};                      // tool turns: the function that answered
};

// A function the model may call (OpenAI's tools[i].function).
struct ChatTool {
  std::string name;
  std::string description = {};  // empty: none
  std::string parameters = {};   // the text of a JSON Schema object; empty: none
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

  // INVALID_ARGUMENT for what the template rejects (raise_exception) or a
  // tool call's arguments or a tool's parameters that are not JSON objects,
  // UNIMPLEMENTED for constructs outside the subset. The template sees what
  // transformers hands it for an OpenAI request (as vLLM builds it): `tools`
  // as [{"type": "function", "function": {name, description, parameters}}]
  // or none, and each message's tool_calls as [{"id", "type": "function",
  // "function": {"name", "arguments": the parsed object}}], with
  // tool_call_id and name on the messages that have them.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt,
                                     std::span<const ChatTool> tools = {}) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::unique_ptr<jinja::Program> program_;
};

// For continue_final_message: cuts `rendered` (a chat rendered without the
// generation prompt) right after the last message's `content`, so that what
// the template closes the turn with (an end-of-turn token, a newline) is gone
// and the model goes on writing that content: after its last occurrence as
// given or trimmed (for templates that trim messages), whichever ends later. INVALID_ARGUMENT,
// naming messages.continue_final_message, for content that is empty once trimmed or that the
// rendered chat does not contain.
absl::Status EndAtFinalContent(std::string_view content, std::string& rendered);

}  // namespace loom
