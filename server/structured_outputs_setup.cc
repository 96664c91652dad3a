#include "server/structured_outputs_setup.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/log.h"

namespace loom {

absl::Status OverrideChatTemplate(const std::string& path, LoadedModel& model) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("chat_template: cannot read ", path));
  std::stringstream source;
  source << in.rdbuf();
  absl::StatusOr<std::unique_ptr<ChatTemplate>> parsed = ChatTemplate::FromJinja(
      source.str(), model.tokenizer->bos_token(), model.tokenizer->eos_token());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat_template: ", path, ": ", parsed.status().message()));
  }
  model.chat_template = *std::move(parsed);
  model.chat_template_error.clear();
  model.chat_template_origin = absl::StrCat("--chat_template=", path);
  return absl::OkStatus();
}

absl::StatusOr<ToolCallFormat> ResolveToolCallFormat(const std::string& flag,
                                                     const LoadedModel& model) {
  if (flag == "none") return ToolCallFormat::kNone;
  if (flag == "auto") {
    return model.chat_template == nullptr ? ToolCallFormat::kNone
                                          : DetectToolCallFormat(model.chat_template->source());
  }
  return ToolCallFormatFromName(flag);
}

ConstraintLimits ConstraintLimitsOf(const ServerConfig& config) {
  ConstraintLimits limits;
  limits.max_text_bytes = config.max_constraint_bytes;
  limits.max_states = config.max_constraint_states;
  limits.max_compile_time = config.constraint_compile_timeout;
  return limits;
}

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> MakeConstraintCompiler(
    const LoadedModel& model, const ConstraintLimits& limits) {
  const Tokenizer& tokenizer = *model.tokenizer;
  ConstraintVocabulary vocabulary;
  // The bitmask spans the logits; a tokenizer entry past them is never sampled.
  vocabulary.vocab_size = model.config.vocab_size;
  const int32_t num_tokens = std::min(tokenizer.vocab_size(), vocabulary.vocab_size);
  vocabulary.token_bytes.resize(static_cast<size_t>(num_tokens));
  for (int32_t id = 0; id < num_tokens; ++id) {
    if (!tokenizer.IsSpecial(id)) {
      vocabulary.token_bytes[static_cast<size_t>(id)] = tokenizer.TokenBytes(id);
    }
  }
  // The EOS ids the engine stops on (daemon.cc's MakeEngineConfig).
  vocabulary.eos_token_ids =
      model.config.eos_token_ids.empty() ? tokenizer.eos_ids() : model.config.eos_token_ids;
  return ConstraintCompiler::Create(std::move(vocabulary), limits);
}

absl::StatusOr<StructuredOutputsSetup> SetUpStructuredOutputs(const ServerConfig& config,
                                                              const LoadedModel& model) {
  StructuredOutputsSetup setup;
  LOOM_ASSIGN_OR_RETURN(setup.tool_call_format,
                        ResolveToolCallFormat(config.tool_call_parser, model));
  LOOM_ASSIGN_OR_RETURN(setup.compiler, MakeConstraintCompiler(model, ConstraintLimitsOf(config)));
  LogLine(absl::StrCat(
      "structured outputs: tool calls in format ",
      std::string(ToolCallFormatName(setup.tool_call_format)), " (--tool_call_parser=",
      config.tool_call_parser, "; chat template ", model.chat_template_origin,
      model.chat_template_error.empty() ? "" : ", unusable: ", model.chat_template_error,
      "); constraints up to ", config.max_constraint_bytes, " bytes, ",
      config.max_constraint_states, " states, compiled within ",
      absl::FormatDuration(config.constraint_compile_timeout)));
  return setup;
}

}  // namespace loom
