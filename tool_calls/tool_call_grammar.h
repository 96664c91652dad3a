// The GBNF grammar of the tool calls a model may write in its format, so
// that the constraint engine guarantees a call that parses and whose
// arguments match the function's parameter schema:
//   hermes       root ::= call ("\n" call)*
//                call ::= "<tool_call>\n{\"name\": " (fn0 | fn1 ...) "}\n</tool_call>"
//                fn0  ::= "\"get_weather\", \"arguments\": " fn0args
//   llama3_json  root ::= call ("; " call)*
//                call ::= "{\"name\": " (fn0 | ...) "}",  fn0 with "parameters"
// where fn0args and its rules come from JsonSchemaToGrammar.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "tool_calls/tool_call_format.h"

namespace loom {

struct ToolFunction {
  std::string name;        // [A-Za-z0-9_-]+: written into the grammar as is
  std::string parameters;  // a JSON Schema object, as text; empty: any object
  size_t tool_index = 0;   // its position among the request's tools, for errors
};

// One or more calls to any of `functions` (tool_choice "required"), or
// exactly one when single_call (a named function: pass just that one).
// INVALID_ARGUMENT for a parameter schema the engine cannot compile,
// naming the function by tool_index: "tools[2].parameters: at /properties/x: ...".
// format must not be kNone.
absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format,
                                            std::span<const ToolFunction> functions,
                                            bool single_call);

}  // namespace loom
