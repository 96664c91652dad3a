// Chat's tool fields: `tools` ([{"type": "function", "function": {"name",
// "description", "parameters", "strict"}}]) and `tool_choice` ("none",
// "auto", "required" or {"type": "function", "function": {"name"}}) into
// ChatMessages, and each message's `tool_calls` (assistant), `tool_call_id`
// and `name` (tool). Shapes only: names, roles and schemas are the
// validator's and the compiler's.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"
#include "openai/ordered_json.h"

namespace loom::openai {

absl::Status ReadTools(const Json& body, v1::ChatMessages* messages);

// `field` names the message ("messages[3]").
absl::Status ReadMessageToolFields(const Json& message, const std::string& field,
                                   v1::ChatMessage* turn);

}  // namespace loom::openai
