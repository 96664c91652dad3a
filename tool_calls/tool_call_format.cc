#include "tool_calls/tool_call_format.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace loom {

absl::StatusOr<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  return absl::InvalidArgumentError(absl::StrCat(
      "tool_call_parser must be one of hermes, llama3_json; got \"", std::string(name), "\""));
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ToolCallFormat ForcedCallFormat(ToolCallFormat model_format) {
  return model_format == ToolCallFormat::kNone ? ToolCallFormat::kLlama3Json : model_format;
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  // A template mentions `tools` when it renders them; the marker it teaches
  // then tells the format.
  if (source.find("tools") == std::string_view::npos) return ToolCallFormat::kNone;
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  const bool llama3_header = source.find("<|start_header_id|>") != std::string_view::npos;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      (llama3_header && source.find("\"parameters\"") != std::string_view::npos)) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

}  // namespace loom
