// The checks of a chat's ChatMessages, shared by Generate and Tokenize: the
// turns, the tools they may call and the tool_choice. Each failure is
// INVALID_ARGUMENT naming the field, e.g. "messages.tools[1].name must match
// [A-Za-z0-9_-]{1,64}; got \"get weather\"".
#pragma once

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"
#include "server/request_validator.h"

namespace loom {

// A non-empty list of system/user/assistant/tool turns (tool calls on
// assistant turns only, their arguments JSON objects); at most kMaxTools
// tools with unique names of [A-Za-z0-9_-]{1,64} and parameters that are a
// JSON object of at most limits.max_constraint_bytes; a tool_choice that
// needs tools has them and a named function is one of them. All the text
// together is at most limits.max_prompt_bytes. `field` prefixes the names.
absl::Status ValidateChatMessages(const v1::ChatMessages& messages, const char* field,
                                  const RequestLimits& limits);

}  // namespace loom
