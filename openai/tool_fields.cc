#include "openai/tool_fields.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

constexpr char kToolChoiceShape[] =
    "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
    "\"function\": {\"name\": ...}}";

absl::StatusOr<std::string> ReadName(const Json& function, const std::string& field) {
  const Json* name = FindField(function, "name");
  if (name == nullptr || !name->is_string()) return TypeError(field + ".name", "a string");
  return name->get<std::string>();
}

absl::Status ReadTool(const Json& tool, const std::string& field, v1::Tool* out) {
  if (!tool.is_object()) return TypeError(field, "an object");
  const Json* type = FindField(tool, "type");
  if (type == nullptr || *type != "function") {
    return InvalidParam("tools", absl::StrCat(field, ".type must be \"function\""));
  }
  const Json* function = FindField(tool, "function");
  const std::string function_field = field + ".function";
  if (function == nullptr || !function->is_object()) return TypeError(function_field, "an object");
  LOOM_ASSIGN_OR_RETURN(*out->mutable_name(), ReadName(*function, function_field));
  LOOM_RETURN_IF_ERROR(
      ReadString(*function, "description", [&](const std::string& v) { out->set_description(v); }));
  LOOM_RETURN_IF_ERROR(ReadBool(*function, "strict", [](bool) {}));
  const Json* parameters = FindField(*function, "parameters");
  if (parameters != nullptr) {
    if (!parameters->is_object()) {
      return InvalidParam("tools", absl::StrCat(function_field, ".parameters must be an object"));
    }
    out->set_parameters(parameters->dump());
  }
  return absl::OkStatus();
}

absl::Status ReadToolChoice(const Json& body, v1::ChatMessages* messages) {
  const Json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  if (choice->is_string()) {
    const std::string& mode = choice->get_ref<const std::string&>();
    if (mode == "none") {
      messages->set_tool_choice(v1::TOOL_CHOICE_NONE);
    } else if (mode == "auto") {
      messages->set_tool_choice(v1::TOOL_CHOICE_AUTO);
    } else if (mode == "required") {
      messages->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
    } else {
      return InvalidParam("tool_choice", absl::StrCat(kToolChoiceShape, "; got \"", mode, "\""));
    }
    return absl::OkStatus();
  }
  const Json* type = choice->is_object() ? FindField(*choice, "type") : nullptr;
  const Json* function = choice->is_object() ? FindField(*choice, "function") : nullptr;
  if (type == nullptr || *type != "function" || function == nullptr || !function->is_object()) {
    return InvalidParam("tool_choice", kToolChoiceShape);
  }
  LOOM_ASSIGN_OR_RETURN(*messages->mutable_tool_choice_function(),
                        ReadName(*function, "tool_choice.function"));
  messages->set_tool_choice(v1::TOOL_CHOICE_FUNCTION);
  return absl::OkStatus();
}

absl::Status ReadToolCall(const Json& call, const std::string& field, v1::ToolCall* out) {
  if (!call.is_object()) return TypeError(field, "an object");
  LOOM_RETURN_IF_ERROR(ReadString(call, "id", [&](const std::string& v) { out->set_id(v); }));
  const Json* function = FindField(call, "function");
  const std::string function_field = field + ".function";
  if (function == nullptr || !function->is_object()) return TypeError(function_field, "an object");
  LOOM_ASSIGN_OR_RETURN(*out->mutable_name(), ReadName(*function, function_field));
  const Json* arguments = FindField(*function, "arguments");
  if (arguments == nullptr) {
    out->set_arguments("{}");
  } else if (arguments->is_string()) {
    out->set_arguments(arguments->get<std::string>());
  } else if (arguments->is_object()) {
    // Some clients send the object itself rather than its text.
    out->set_arguments(arguments->dump());
  } else {
    return TypeError(function_field + ".arguments", "a string of a JSON object");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadTools(const Json& body, v1::ChatMessages* messages) {
  const Json* tools = FindField(body, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) return TypeError("tools", "an array of tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      LOOM_RETURN_IF_ERROR(
          ReadTool((*tools)[i], absl::StrCat("tools[", i, "]"), messages->add_tools()));
    }
  }
  return ReadToolChoice(body, messages);
}

absl::Status ReadMessageToolFields(const Json& message, const std::string& field,
                                   v1::ChatMessage* turn) {
  LOOM_RETURN_IF_ERROR(ReadString(message, "tool_call_id",
                                  [&](const std::string& v) { turn->set_tool_call_id(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadString(message, "name", [&](const std::string& v) { turn->set_name(v); }));
  const Json* calls = FindField(message, "tool_calls");
  if (calls == nullptr) return absl::OkStatus();
  if (!calls->is_array()) return TypeError(field + ".tool_calls", "an array of tool calls");
  for (size_t i = 0; i < calls->size(); ++i) {
    LOOM_RETURN_IF_ERROR(ReadToolCall((*calls)[i], absl::StrCat(field, ".tool_calls[", i, "]"),
                                      turn->add_tool_calls()));
  }
  return absl::OkStatus();
}

}  // namespace loom::openai
