#include "server/loaded_model_frontend.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

#ifndef LOOM_VERSION
#define LOOM_VERSION "dev"
#endif

namespace loom {

std::vector<int32_t> LoadedModelFrontend::Encode(std::string_view text,
                                                 bool add_special_tokens) const {
  return model_.tokenizer->Encode(text, add_special_tokens);
}

absl::StatusOr<std::string> LoadedModelFrontend::RenderChat(
    const v1::ChatMessages& messages) const {
  if (model_.chat_template == nullptr) {
    return absl::FailedPreconditionError(
        model_.chat_template_error.empty()
            ? std::string("messages: the model has no chat template; send a prompt instead")
            : absl::StrCat("messages: the model's chat template is unusable: ",
                           model_.chat_template_error));
  }
  std::vector<ChatMessage> turns;
  turns.reserve(messages.messages_size());
  for (const v1::ChatMessage& m : messages.messages()) {
    ChatMessage& turn = turns.emplace_back(ChatMessage{m.role(), m.content()});
    for (const v1::ToolCall& call : m.tool_calls()) {
      turn.tool_calls.push_back({call.id(), call.name(), call.arguments()});
    }
    turn.tool_call_id = m.tool_call_id();
    turn.name = m.name();
  }
  std::vector<ChatTool> tools;
  tools.reserve(messages.tools_size());
  for (const v1::Tool& tool : messages.tools()) {
    tools.push_back({tool.name(), tool.description(), tool.parameters()});
  }
  const bool open_last = messages.continue_final_message();
  const bool add_generation_prompt =
      messages.has_add_generation_prompt() ? messages.add_generation_prompt() : !open_last;
  absl::StatusOr<std::string> rendered =
      model_.chat_template->Render(turns, add_generation_prompt, tools);
  if (!rendered.ok()) {
    // What the template rejects (its raise_exception text) is about the
    // messages: say so, so that the error names them.
    if (rendered.status().code() != absl::StatusCode::kInvalidArgument) return rendered.status();
    return absl::InvalidArgumentError(absl::StrCat("messages: ", rendered.status().message()));
  }
  if (open_last) LOOM_RETURN_IF_ERROR(EndAtFinalContent(turns.back().content, *rendered));
  return rendered;
}

std::string LoadedModelFrontend::Decode(std::span<const int32_t> ids) const {
  return model_.tokenizer->Decode(ids);
}

std::string LoadedModelFrontend::TokenToPiece(int32_t id) const {
  return model_.tokenizer->TokenToPiece(id);
}

v1::ModelInfo DescribeModel(const LoadedModel& model, const ExecutorGeometry& geometry,
                            int32_t max_model_len, const std::string& served_model_name,
                            bool prefix_caching) {
  const ModelConfig& config = model.config;
  v1::ModelInfo info;
  info.set_name(served_model_name.empty() ? model.name : served_model_name);
  info.set_architecture(config.architecture);
  info.set_vocab_size(static_cast<uint32_t>(config.vocab_size));
  info.set_max_model_len(static_cast<uint32_t>(max_model_len));
  info.set_num_layers(static_cast<uint32_t>(config.num_layers));
  info.set_num_kv_heads(static_cast<uint32_t>(config.num_kv_heads));
  info.set_head_dim(static_cast<uint32_t>(config.head_dim));
  info.set_dtype(geometry.dtype);
  info.set_device(geometry.device);
  info.set_block_size(static_cast<uint32_t>(geometry.block_size));
  // Block 0 is the null block: it never holds tokens.
  info.set_num_kv_blocks(
      static_cast<uint32_t>(geometry.num_blocks > 0 ? geometry.num_blocks - 1 : 0));
  const std::vector<int32_t> eos =
      config.eos_token_ids.empty() ? model.tokenizer->eos_ids() : config.eos_token_ids;
  info.set_eos_token_id(eos.empty() ? -1 : eos.front());
  info.set_prefix_caching(prefix_caching);
  info.set_version(LOOM_VERSION);
  return info;
}

}  // namespace loom
