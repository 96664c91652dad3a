// The tool-call formats of model families, named as vLLM's
// --tool-call-parser names them: how a model writes a function call in its
// output, which the parsers read back and the grammars force.
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one
//                block per call (Hermes, Qwen 2.5 and later, many ChatML models)
//   llama3_json  {"name": ..., "parameters": {...}}, optionally after
//                <|python_tag|>, calls separated by ";" (Llama 3.1 / 3.2)
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace loom {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json };

// "hermes" or "llama3_json"; INVALID_ARGUMENT naming the accepted names.
absl::StatusOr<ToolCallFormat> ToolCallFormatFromName(std::string_view name);
std::string_view ToolCallFormatName(ToolCallFormat format);  // "none" for kNone

// The format a chat template teaches its model, from the markers its tools
// section writes: "<tool_call>" (hermes) or "<|python_tag|>" / a
// "parameters" call format in a Llama 3 header layout (llama3_json);
// kNone when the template has no tools section it recognises.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template_source);

// The format of the calls that tool_choice "required" or a named function
// forces: the model's, or, for a model without one, llama3_json's plain JSON
// objects (`{"name": "f", "parameters": {...}}`, separated by "; "), which
// need no tags the model would have to know.
ToolCallFormat ForcedCallFormat(ToolCallFormat model_format);

}  // namespace loom
