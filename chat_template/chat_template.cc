#include "chat_template/chat_template.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using jinja::Value;

// JSON as template values, objects in the order the client wrote them;
// nesting is bounded like a template's own expressions.
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, int depth = 0) {
  if (depth > jinja::kMaxParseDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested deeper than ", jinja::kMaxParseDepth, " levels"));
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::object: {
      jinja::OrderedDict dict;
      for (const auto& [key, item] : json.items()) {
        LOOM_ASSIGN_OR_RETURN(dict[key], FromJson(item, depth + 1));
      }
      return Value::MakeDict(std::move(dict));
    }
    case nlohmann::ordered_json::value_t::array: {
      Value::List list;
      for (const nlohmann::ordered_json& item : json) {
        LOOM_ASSIGN_OR_RETURN(Value v, FromJson(item, depth + 1));
        list.push_back(std::move(v));
      }
      return Value::MakeList(std::move(list));
    }
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    default:
      return Value(Value::None{});
  }
}

// The text of a JSON object as a value; `what` names it in the error.
absl::StatusOr<Value> ObjectFromText(const std::string& text, const std::string& what) {
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a JSON object"));
  }
  absl::StatusOr<Value> value = FromJson(json);
  if (!value.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", value.status().message()));
  return value;
}

absl::StatusOr<Value> MessageValue(const ChatMessage& m) {
  jinja::OrderedDict message = {{"role", Value(m.role)}, {"content", Value(m.content)}};
  if (!m.tool_calls.empty()) {
    Value::List calls;
    for (const ChatToolCall& call : m.tool_calls) {
      LOOM_ASSIGN_OR_RETURN(
          Value arguments,
          ObjectFromText(call.arguments, absl::StrCat("the arguments of tool call ", call.id)));
      calls.push_back(Value::MakeDict(
          {{"id", Value(call.id)},
           {"type", Value("function")},
           {"function",
            Value::MakeDict({{"name", Value(call.name)}, {"arguments", std::move(arguments)}})}}));
    }
    message["tool_calls"] = Value::MakeList(std::move(calls));
  }
  if (!m.tool_call_id.empty()) message["tool_call_id"] = Value(m.tool_call_id);
  if (!m.name.empty()) message["name"] = Value(m.name);
  return Value::MakeDict(std::move(message));
}

// transformers passes tools as None when the request has none.
absl::StatusOr<Value> ToolsValue(std::span<const ChatTool> tools) {
  if (tools.empty()) return Value(Value::None{});
  Value::List list;
  for (const ChatTool& tool : tools) {
    jinja::OrderedDict function = {{"name", Value(tool.name)}};
    if (!tool.description.empty()) function["description"] = Value(tool.description);
    if (!tool.parameters.empty()) {
      LOOM_ASSIGN_OR_RETURN(
          function["parameters"],
          ObjectFromText(tool.parameters, absl::StrCat("the parameters of tool ", tool.name)));
    }
    list.push_back(Value::MakeDict(
        {{"type", Value("function")}, {"function", Value::MakeDict(std::move(function))}}));
  }
  return Value::MakeList(std::move(list));
}

}  // namespace

ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromJinja(std::string source,
                                                                      std::string bos_token,
                                                                      std::string eos_token) {
  if (source.size() > jinja::kMaxSourceBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("chat template: source of ", source.size(),
                                                     " bytes exceeds the limit of ",
                                                     jinja::kMaxSourceBytes, " bytes"));
  }
  LOOM_ASSIGN_OR_RETURN(jinja::NodeList nodes, jinja::Parse(source));
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->source_ = std::move(source);
  t->bos_token_ = std::move(bos_token);
  t->eos_token_ = std::move(eos_token);
  t->program_ = std::make_unique<jinja::Program>();
  t->program_->nodes = std::move(nodes);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt,
                                                 std::span<const ChatTool> tools) const {
  Value::List list;
  for (const ChatMessage& m : messages) {
    LOOM_ASSIGN_OR_RETURN(Value message, MessageValue(m));
    list.push_back(std::move(message));
  }
  LOOM_ASSIGN_OR_RETURN(Value tools_value, ToolsValue(tools));
  const Value::Dict globals = {
      {"messages", Value::MakeList(std::move(list))},
      {"add_generation_prompt", Value(add_generation_prompt)},
      {"bos_token", Value(bos_token_)},
      {"eos_token", Value(eos_token_)},
      {"tools", std::move(tools_value)},
      {"documents", Value(Value::None{})},
  };
  return jinja::Render(program_->nodes, globals);
}

absl::Status EndAtFinalContent(std::string_view content, std::string& rendered) {
  constexpr std::string_view kSpace = " \t\n\r";
  const size_t first = content.find_first_not_of(kSpace);
  const std::string_view trimmed =
      first == std::string_view::npos
          ? std::string_view()
          : content.substr(first, content.find_last_not_of(kSpace) - first + 1);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(
        "messages.continue_final_message needs a last message with content to continue");
  }
  // The content as given, or trimmed, whichever ends last in the chat: an
  // earlier turn may hold the untrimmed text too.
  size_t end = 0;
  for (const std::string_view text : {content, trimmed}) {
    const size_t at = rendered.rfind(text);
    if (at != std::string::npos) end = std::max(end, at + text.size());
  }
  if (end > 0) {
    rendered.resize(end);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "messages.continue_final_message: the chat template does not reproduce the last "
      "message's content, so there is no place to continue it from");
}

}  // namespace loom
