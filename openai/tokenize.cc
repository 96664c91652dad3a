#include "openai/tokenize.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/chat_request.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"
#include "openai/response_json.h"

namespace loom::openai {

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(absl::string_view body) {
  LOOM_ASSIGN_OR_RETURN(const Json json, ParseJsonObject(body));
  TokenizeRequest parsed;
  LOOM_RETURN_IF_ERROR(ReadString(json, "model", [&](const std::string& v) { parsed.model = v; }));
  LOOM_RETURN_IF_ERROR(ReadBool(json, "add_special_tokens",
                                [&](bool v) { parsed.request.set_add_special_tokens(v); }));
  const bool has_prompt = FindField(json, "prompt") != nullptr;
  const bool has_messages = FindField(json, "messages") != nullptr;
  if (has_prompt == has_messages) {
    return InvalidParam("prompt", "exactly one of prompt and messages must be given");
  }
  if (has_prompt) {
    LOOM_RETURN_IF_ERROR(
        ReadString(json, "prompt", [&](const std::string& v) { parsed.request.set_text(v); }));
    return parsed;
  }
  // The chat parser reads the messages (and ignores the generation fields).
  LOOM_ASSIGN_OR_RETURN(ChatRequest chat, ParseChatRequest(body));
  *parsed.request.mutable_messages() = std::move(*chat.request.mutable_messages());
  return parsed;
}

std::string RenderTokenizeResponse(std::span<const int32_t> ids,
                                   std::span<const std::string> pieces, int64_t max_model_len) {
  nlohmann::json tokens = nlohmann::json::array();
  for (int32_t id : ids) tokens.push_back(id);
  nlohmann::json strs = nlohmann::json::array();
  for (const std::string& piece : pieces) strs.push_back(piece);
  return Dump({{"count", ids.size()},
               {"max_model_len", max_model_len},
               {"tokens", std::move(tokens)},
               {"token_strs", std::move(strs)}});
}

absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(absl::string_view body) {
  LOOM_ASSIGN_OR_RETURN(const Json json, ParseJsonObject(body));
  DetokenizeRequest parsed;
  LOOM_RETURN_IF_ERROR(ReadString(json, "model", [&](const std::string& v) { parsed.model = v; }));
  const Json* tokens = FindField(json, "tokens");
  if (tokens == nullptr) return InvalidParam("tokens", "tokens is required");
  if (!tokens->is_array()) return TypeError("tokens", "an array of token ids");
  for (size_t i = 0; i < tokens->size(); ++i) {
    const absl::StatusOr<int64_t> id = AsInteger((*tokens)[i], absl::StrCat("tokens[", i, "]"), 0,
                                                 std::numeric_limits<int32_t>::max());
    // The message names the element; the parameter is the array.
    if (!id.ok()) return InvalidParam("tokens", id.status().message());
    parsed.tokens.push_back(static_cast<int32_t>(*id));
  }
  return parsed;
}

std::string RenderDetokenizeResponse(absl::string_view text) {
  return Dump({{"prompt", std::string(text)}});
}

std::string RenderVersion(absl::string_view version) {
  return Dump({{"version", std::string(version)}});
}

}  // namespace loom::openai
