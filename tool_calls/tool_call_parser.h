// Reads tool calls out of a model's generated text, as it streams or whole,
// in one of the formats of tool_call_format.h. A parser takes the text deltas
// of one sample and returns, per delta, the content to show and the tool-call
// deltas to send: a call's first delta names the function, later ones append
// fragments of its arguments' JSON text (OpenAI's streaming shape). Parsing a
// whole text is feeding it at once: the result does not depend on how the
// text was split.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tool_calls/tool_call_format.h"

namespace loom {

struct ToolCallDelta {
  int index = 0;          // the call's position in the message, from 0
  std::string name;       // set on the call's first delta only
  std::string arguments;  // a fragment of the arguments' JSON text
};

struct ToolCallUpdate {
  std::string content;  // text that is not part of a call
  std::vector<ToolCallDelta> calls;

  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;

  // The next text delta of the sample.
  virtual ToolCallUpdate Feed(std::string_view text) = 0;
  // The sample has ended: what was held back (a partial marker, a call cut
  // short) comes out.
  virtual ToolCallUpdate Finish() = 0;
  // Calls started so far.
  virtual int num_calls() const = 0;
};

// A parser for `format`, which must not be kNone.
std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format);

struct ToolCall {
  std::string name;
  std::string arguments;  // the model's JSON text of the arguments object
};

struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
};

// Whole text: what the streamed deltas add up to.
ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text);

// Adds one update's content and call deltas to a parsed result.
void ApplyToolCallUpdate(const ToolCallUpdate& update, ParsedToolCalls& parsed);

}  // namespace loom
