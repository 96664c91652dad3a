#include "server/chat_messages_validator.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

constexpr size_t kMaxToolNameLength = 64;

bool IsToolName(const std::string& name) {
  if (name.empty() || name.size() > kMaxToolNameLength) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// OK when text is a JSON object; the message names `path`.
absl::Status CheckJsonObject(const std::string& text, const std::string& path) {
  if (nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_object()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " must be a JSON object"));
}

absl::Status CheckTurn(const v1::ChatMessage& m, const std::string& path) {
  const std::string& role = m.role();
  if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ".role must be one of system, user, assistant, tool; got \"", role, "\""));
  }
  if (m.tool_calls_size() > 0 && role != "assistant") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ".tool_calls are allowed on assistant turns only; got role \"", role, "\""));
  }
  for (int j = 0; j < m.tool_calls_size(); ++j) {
    const std::string call = absl::StrCat(path, ".tool_calls[", j, "]");
    if (m.tool_calls(j).name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(call, ".name must not be empty"));
    }
    LOOM_RETURN_IF_ERROR(CheckJsonObject(m.tool_calls(j).arguments(), call + ".arguments"));
  }
  return absl::OkStatus();
}

int64_t TurnBytes(const v1::ChatMessage& m) {
  int64_t bytes = static_cast<int64_t>(m.role().size() + m.content().size() +
                                       m.tool_call_id().size() + m.name().size());
  for (const v1::ToolCall& call : m.tool_calls()) {
    bytes += static_cast<int64_t>(call.id().size() + call.name().size() + call.arguments().size());
  }
  return bytes;
}

absl::Status CheckTools(const v1::ChatMessages& messages, const std::string& field,
                        const RequestLimits& limits) {
  if (messages.tools_size() > kMaxTools) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".tools must have at most ", kMaxTools,
                                                   " tools; got ", messages.tools_size()));
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < messages.tools_size(); ++i) {
    const v1::Tool& tool = messages.tools(i);
    const std::string path = absl::StrCat(field, ".tools[", i, "]");
    if (!IsToolName(tool.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".name must match [A-Za-z0-9_-]{1,64}; got \"", tool.name(), "\""));
    }
    if (!names.insert(tool.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".name must be unique; \"", tool.name(), "\" is listed twice"));
    }
    const auto size = static_cast<int64_t>(tool.parameters().size());
    if (size > limits.max_constraint_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ".parameters must have at most ",
                                                     limits.max_constraint_bytes, " bytes; got ",
                                                     size, " bytes"));
    }
    if (!tool.parameters().empty()) {
      LOOM_RETURN_IF_ERROR(CheckJsonObject(tool.parameters(), path + ".parameters"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckToolChoice(const v1::ChatMessages& messages, const std::string& field) {
  const v1::ToolChoice choice = messages.tool_choice();
  if (!v1::ToolChoice_IsValid(choice)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field,
                     ".tool_choice must be one of TOOL_CHOICE_UNSPECIFIED, TOOL_CHOICE_NONE, "
                     "TOOL_CHOICE_AUTO, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_FUNCTION; got ",
                     choice));
  }
  const bool named = choice == v1::TOOL_CHOICE_FUNCTION;
  if (named != !messages.tool_choice_function().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".tool_choice_function must be set exactly when ", field,
                     ".tool_choice is TOOL_CHOICE_FUNCTION"));
  }
  if ((named || choice == v1::TOOL_CHOICE_REQUIRED) && messages.tools().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".tool_choice ", v1::ToolChoice_Name(choice), " needs ", field, ".tools; got none"));
  }
  if (named) {
    for (const v1::Tool& tool : messages.tools()) {
      if (tool.name() == messages.tool_choice_function()) return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(field, ".tool_choice_function must name one of ",
                                                   field, ".tools; got \"",
                                                   messages.tool_choice_function(), "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckGenerationPrompt(const v1::ChatMessages& messages, const std::string& field) {
  if (messages.continue_final_message() && messages.has_add_generation_prompt() &&
      messages.add_generation_prompt()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".continue_final_message cannot be true while ", field,
                     ".add_generation_prompt is true: the reply either continues the last "
                     "message or starts a new one"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateChatMessages(const v1::ChatMessages& messages, const char* field,
                                  const RequestLimits& limits) {
  if (messages.messages().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".messages must not be empty"));
  }
  int64_t bytes = 0;
  for (int i = 0; i < messages.messages_size(); ++i) {
    LOOM_RETURN_IF_ERROR(
        CheckTurn(messages.messages(i), absl::StrCat(field, ".messages[", i, "]")));
    bytes += TurnBytes(messages.messages(i));
  }
  LOOM_RETURN_IF_ERROR(CheckTools(messages, field, limits));
  LOOM_RETURN_IF_ERROR(CheckToolChoice(messages, field));
  LOOM_RETURN_IF_ERROR(CheckGenerationPrompt(messages, field));
  for (const v1::Tool& tool : messages.tools()) {
    bytes += static_cast<int64_t>(tool.name().size() + tool.description().size() +
                                  tool.parameters().size());
  }
  if (bytes > limits.max_prompt_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " (turns and tools together) must have at most ",
                     limits.max_prompt_bytes, " bytes; got ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace loom
