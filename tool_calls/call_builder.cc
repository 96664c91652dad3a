#include "tool_calls/call_builder.h"

#include "nlohmann/json.hpp"

namespace loom {
namespace {

// Appends an arguments fragment to this call's delta in the update, or
// starts one.
void AppendArguments(int index, std::string_view fragment, ToolCallUpdate& update) {
  if (update.calls.empty() || update.calls.back().index != index) {
    update.calls.push_back({index, "", ""});
  }
  update.calls.back().arguments.append(fragment);
}

}  // namespace

bool CallBuilder::Update(std::string_view object, ToolCallUpdate& update) {
  // Members read before a byte that breaks the JSON still count, so that a
  // call reads the same whole or streamed.
  scanner_.Scan(object);
  if (!named_) {
    const JsonMember* name = scanner_.Find("name");
    if (name == nullptr || !name->complete) return scanner_.valid();
    const nlohmann::json value = nlohmann::json::parse(
        object.substr(name->value_begin, name->value_end - name->value_begin), nullptr,
        /*allow_exceptions=*/false);
    if (!value.is_string()) return false;
    update.calls.push_back({index_, value.get<std::string>(), ""});
    named_ = true;
  }
  // The first of "arguments" (hermes) and "parameters" (Llama 3), so that
  // a call naming both streams the same one whole or in pieces.
  const JsonMember* arguments = nullptr;
  for (const JsonMember& member : scanner_.members()) {
    if (member.key == "arguments" || member.key == "parameters") {
      arguments = &member;
      break;
    }
  }
  if (arguments == nullptr) return scanner_.valid();
  const size_t sent_end = arguments->value_begin + arguments_sent_;
  if (arguments->value_end > sent_end) {
    AppendArguments(index_, object.substr(sent_end, arguments->value_end - sent_end), update);
    arguments_sent_ = arguments->value_end - arguments->value_begin;
  }
  return scanner_.valid();
}

void CallBuilder::Finish(ToolCallUpdate& update) {
  // A closed call without arguments (a function of no parameters written as
  // {"name": "f"}) gets "{}"; one cut off (max_tokens, a stop) keeps what was
  // written, nothing included: arguments the model did not write are never
  // made up.
  if (named_ && arguments_sent_ == 0 && scanner_.closed()) {
    AppendArguments(index_, "{}", update);
    arguments_sent_ = 2;
  }
}

}  // namespace loom
