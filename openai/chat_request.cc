#include "openai/chat_request.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"
#include "openai/request_fields.h"
#include "openai/tool_fields.h"

namespace loom::openai {
namespace {

// Text parts joined with newlines, as vLLM renders a multi-part message into
// a template that expects one string.
absl::StatusOr<std::string> ReadContent(const Json& message, const std::string& role,
                                        const std::string& field) {
  const Json* content = FindField(message, "content");
  if (content == nullptr) {
    // An assistant turn may have none (a turn of tool calls); the other
    // roles need theirs, as OpenAI's API has it. Unknown roles are the
    // validator's to name.
    if (role == "system" || role == "user" || role == "tool") {
      return InvalidParam(field + ".content",
                          absl::StrCat(field, ".content is required for a ", role, " message"));
    }
    return std::string();
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return TypeError(field + ".content", "a string or an array of content parts");
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_field = absl::StrCat(field, ".content[", i, "]");
    if (!part.is_object()) return TypeError(part_field, "an object");
    const Json* type = FindField(part, "type");
    if (type == nullptr || !type->is_string() || type->get_ref<const std::string&>() != "text") {
      return InvalidParam(part_field + ".type",
                          absl::StrCat(part_field,
                                       ".type must be \"text\" (the only content "
                                       "part type supported)"));
    }
    const Json* part_text = FindField(part, "text");
    if (part_text == nullptr || !part_text->is_string()) {
      return TypeError(part_field + ".text", "a string");
    }
    if (i > 0) text += '\n';
    text += part_text->get_ref<const std::string&>();
  }
  return text;
}

absl::StatusOr<v1::ChatMessages> ReadMessages(const Json& body) {
  const Json* messages = FindField(body, "messages");
  if (messages == nullptr) return InvalidParam("messages", "messages is required");
  if (!messages->is_array()) return TypeError("messages", "an array of messages");
  v1::ChatMessages out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!message.is_object()) return TypeError(field, "an object");
    const Json* role = FindField(message, "role");
    if (role == nullptr || !role->is_string()) return TypeError(field + ".role", "a string");
    v1::ChatMessage& turn = *out.add_messages();
    // OpenAI's "developer" role takes the place of "system" for newer models;
    // chat templates know it as system.
    const std::string& name = role->get_ref<const std::string&>();
    turn.set_role(name == "developer" ? "system" : name);
    LOOM_ASSIGN_OR_RETURN(*turn.mutable_content(), ReadContent(message, turn.role(), field));
    LOOM_RETURN_IF_ERROR(ReadMessageToolFields(message, field, &turn));
  }
  LOOM_RETURN_IF_ERROR(ReadTools(body, &out));
  LOOM_RETURN_IF_ERROR(
      ReadBool(body, "add_generation_prompt", [&](bool v) { out.set_add_generation_prompt(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadBool(body, "continue_final_message", [&](bool v) { out.set_continue_final_message(v); }));
  return out;
}

// logprobs is a bool here; top_logprobs (the alternatives) needs it set.
absl::Status ReadLogprobs(const Json& body, ChatRequest* parsed) {
  bool logprobs = false;
  LOOM_RETURN_IF_ERROR(ReadBool(body, "logprobs", [&](bool v) { logprobs = v; }));
  int32_t top = 0;
  bool has_top = false;
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "top_logprobs", std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(), [&](int64_t v) {
                                     top = static_cast<int32_t>(v);
                                     has_top = true;
                                   }));
  if (has_top && !logprobs) {
    return InvalidParam("top_logprobs", "top_logprobs requires logprobs to be true");
  }
  if (logprobs) {
    parsed->request.set_logprobs(top);
    parsed->options.logprobs = top;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatRequest> ParseChatRequest(absl::string_view body) {
  LOOM_ASSIGN_OR_RETURN(const Json json, ParseJsonObject(body));
  ChatRequest parsed;
  LOOM_RETURN_IF_ERROR(ReadSharedFields(json, &parsed.request, &parsed.options));
  // max_completion_tokens replaces the deprecated max_tokens when both are given.
  LOOM_RETURN_IF_ERROR(ReadInteger(
      json, "max_completion_tokens", 0, std::numeric_limits<uint32_t>::max(), [&](int64_t v) {
        parsed.request.mutable_stopping()->set_max_tokens(static_cast<uint32_t>(v));
      }));
  LOOM_RETURN_IF_ERROR(ReadLogprobs(json, &parsed));
  LOOM_ASSIGN_OR_RETURN(*parsed.request.mutable_messages(), ReadMessages(json));
  return parsed;
}

}  // namespace loom::openai
