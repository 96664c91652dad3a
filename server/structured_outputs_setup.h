// loomd's structured-output setup for the loaded model: the --chat_template
// override, the tool-call format (--tool_call_parser, or detected from the
// chat template when "auto"), and the ConstraintCompiler over the model's
// vocabulary with the --max_constraint_* limits.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "constraint/constraint_compiler.h"
#include "model/model.h"
#include "server/server_config.h"
#include "tool_calls/tool_call_format.h"

namespace loom {

// Replaces the model's chat template with the Jinja file at `path` (none
// when empty): NOT_FOUND when it cannot be read, INVALID_ARGUMENT with the
// parser's error when it does not parse.
absl::Status OverrideChatTemplate(const std::string& path, LoadedModel& model);

// --tool_call_parser: hermes or llama3_json as named, none, or auto (the
// format the chat template's tools section teaches, kNone without one).
absl::StatusOr<ToolCallFormat> ResolveToolCallFormat(const std::string& flag,
                                                     const LoadedModel& model);

// The limits of ConstraintCompiler::Compile from the flags.
ConstraintLimits ConstraintLimitsOf(const ServerConfig& config);

// A compiler over the model's tokens: every token's bytes, special tokens
// none (they never spell text), the model's EOS ids, the logits width.
absl::StatusOr<std::unique_ptr<ConstraintCompiler>> MakeConstraintCompiler(
    const LoadedModel& model, const ConstraintLimits& limits);

// What loomd serves structured outputs with; logs the format it uses.
struct StructuredOutputsSetup {
  std::unique_ptr<ConstraintCompiler> compiler;
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};
absl::StatusOr<StructuredOutputsSetup> SetUpStructuredOutputs(const ServerConfig& config,
                                                              const LoadedModel& model);

}  // namespace loom
