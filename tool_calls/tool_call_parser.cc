#include "tool_calls/tool_call_parser.h"

#include "base/check.h"
#include "tool_calls/parsers.h"

namespace loom {

std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format) {
  LOOM_CHECK(format != ToolCallFormat::kNone) << "no tool-call parser for format none";
  return format == ToolCallFormat::kHermes ? MakeHermesParser() : MakeLlama3JsonParser();
}

void ApplyToolCallUpdate(const ToolCallUpdate& update, ParsedToolCalls& parsed) {
  parsed.content += update.content;
  for (const ToolCallDelta& delta : update.calls) {
    if (delta.index >= static_cast<int>(parsed.calls.size())) {
      parsed.calls.push_back({delta.name, ""});
    }
    parsed.calls[static_cast<size_t>(delta.index)].arguments += delta.arguments;
  }
}

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text) {
  std::unique_ptr<ToolCallParser> parser = MakeToolCallParser(format);
  ParsedToolCalls parsed;
  ApplyToolCallUpdate(parser->Feed(text), parsed);
  ApplyToolCallUpdate(parser->Finish(), parsed);
  return parsed;
}

}  // namespace loom
