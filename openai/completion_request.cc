#include "openai/completion_request.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"
#include "openai/request_fields.h"

namespace loom::openai {
namespace {

constexpr absl::string_view kPromptShape =
    "a string, an array of strings, an array of token ids or an array of token-id arrays";

absl::StatusOr<v1::TokenIds> ReadTokenIds(const Json& array) {
  v1::TokenIds ids;
  for (const Json& id : array) {
    LOOM_ASSIGN_OR_RETURN(const int64_t v,
                          AsInteger(id, "prompt", std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max()));
    ids.add_ids(static_cast<int32_t>(v));
  }
  return ids;
}

// One GenerateRequest input per prompt; the shape is decided by the first element.
absl::StatusOr<std::vector<v1::GenerateRequest>> ReadPrompts(const Json& body) {
  const Json* prompt = FindField(body, "prompt");
  if (prompt == nullptr) return InvalidParam("prompt", "prompt is required");
  std::vector<v1::GenerateRequest> prompts;
  if (prompt->is_string()) {
    prompts.emplace_back().set_prompt(prompt->get<std::string>());
    return prompts;
  }
  if (!prompt->is_array() || prompt->empty()) return TypeError("prompt", kPromptShape);
  if (prompt->front().is_number()) {
    LOOM_ASSIGN_OR_RETURN(*prompts.emplace_back().mutable_prompt_token_ids(),
                          ReadTokenIds(*prompt));
    return prompts;
  }
  const bool strings = prompt->front().is_string();
  for (const Json& item : *prompt) {
    if (strings && item.is_string()) {
      prompts.emplace_back().set_prompt(item.get<std::string>());
    } else if (!strings && item.is_array()) {
      LOOM_ASSIGN_OR_RETURN(*prompts.emplace_back().mutable_prompt_token_ids(), ReadTokenIds(item));
    } else {
      return TypeError("prompt", kPromptShape);
    }
  }
  return prompts;
}

// Fields of OpenAI's completions that Loom does not implement are refused
// rather than ignored, as vLLM does, so that a client never takes an answer
// to another question for the one it asked: a suffix (insertion) and best_of
// (more candidates than n, ranked) other than its default.
absl::Status ReadUnsupported(const Json& body, int32_t n) {
  std::string suffix;
  LOOM_RETURN_IF_ERROR(ReadString(body, "suffix", [&](const std::string& v) { suffix = v; }));
  if (!suffix.empty()) {
    return InvalidParam("suffix",
                        "suffix is not supported: Loom completes a prompt, it does not insert "
                        "text before a suffix");
  }
  int64_t best_of = 1;
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "best_of", std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(),
                                   [&](int64_t v) { best_of = v; }));
  if (best_of != 1 && best_of != n) {
    return InvalidParam("best_of", absl::StrCat("best_of must be 1 or n (", n, "); got ", best_of,
                                                ": ranking more candidates than n is not "
                                                "supported"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(absl::string_view body) {
  LOOM_ASSIGN_OR_RETURN(const Json json, ParseJsonObject(body));
  CompletionRequest parsed;
  v1::GenerateRequest shared;
  LOOM_RETURN_IF_ERROR(ReadSharedFields(json, &shared, &parsed.options));
  LOOM_RETURN_IF_ERROR(ReadBool(json, "echo", [&](bool v) { parsed.options.echo = v; }));
  LOOM_RETURN_IF_ERROR(ReadInteger(json, "logprobs", std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(), [&](int64_t v) {
                                     shared.set_logprobs(static_cast<int32_t>(v));
                                     parsed.options.logprobs = static_cast<int32_t>(v);
                                   }));
  // echo with logprobs scores the echoed prompt too: the engine is asked for
  // (at least) as many alternatives per prompt token.
  if (parsed.options.echo && parsed.options.logprobs.has_value() &&
      (!shared.has_prompt_logprobs() || shared.prompt_logprobs() < *parsed.options.logprobs)) {
    shared.set_prompt_logprobs(*parsed.options.logprobs);
  }
  LOOM_RETURN_IF_ERROR(ReadUnsupported(json, parsed.options.n));
  LOOM_ASSIGN_OR_RETURN(parsed.prompts, ReadPrompts(json));
  for (v1::GenerateRequest& request : parsed.prompts) {
    // MergeFrom leaves the input oneof alone: `shared` never sets it.
    request.MergeFrom(shared);
  }
  return parsed;
}

}  // namespace loom::openai
