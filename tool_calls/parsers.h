// The parser of each format (internal to tool_calls/; MakeToolCallParser
// picks one).
#pragma once

#include <memory>

#include "tool_calls/tool_call_parser.h"

namespace loom {

std::unique_ptr<ToolCallParser> MakeHermesParser();
std::unique_ptr<ToolCallParser> MakeLlama3JsonParser();

}  // namespace loom
