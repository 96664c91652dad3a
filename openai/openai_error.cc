#include "openai/openai_error.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"

namespace loom::openai {
namespace {

constexpr absl::string_view kParamPayload = "type.loom.dev/openai.param";

struct PathRewrite {
  absl::string_view proto_prefix;
  absl::string_view openai_prefix;
};

// Paths whose OpenAI name differs, at the start of a message.
constexpr PathRewrite kLeadingRewrites[] = {
    {"prompt_token_ids.ids", "prompt"},
    {"messages.messages", "messages"},
    {"messages.tool_choice_function", "tool_choice"},
    {"messages.tool_choice", "tool_choice"},
    {"messages.tools", "tools"},
    {"truncate", "truncate_prompt_tokens"},
};

// "tools[2].parameters" -> "tools[2].function.parameters": a tool's fields
// sit under "function" in OpenAI's request.
std::string ToolFunctionPath(std::string message) {
  if (!absl::StartsWith(message, "tools[")) return message;
  const size_t close = message.find("].");
  if (close == std::string::npos) return message;
  message.insert(close + 2, "function.");
  return message;
}

// The parameter a message's leading path names: "stop[3]" -> "stop",
// "logit_bias key" -> "logit_bias".
std::string ParamOf(absl::string_view message) {
  const size_t end = message.find_first_of(" [.(:");
  absl::string_view head = message.substr(0, end);
  if (head == "input") return "";
  return std::string(head);
}

// Rewrites the proto paths of a validator message to OpenAI names: the
// leading one, and any sampling./stopping./tool path it mentions later
// ("min_tokens must be in [0, stopping.max_tokens]").
std::string RewriteMessage(absl::string_view message, Endpoint endpoint) {
  std::string rewritten(message);
  for (const PathRewrite& rewrite : kLeadingRewrites) {
    if (absl::StartsWith(message, rewrite.proto_prefix)) {
      rewritten = absl::StrCat(rewrite.openai_prefix, message.substr(rewrite.proto_prefix.size()));
      break;
    }
  }
  if (endpoint == Endpoint::kChatCompletions && absl::StartsWith(message, "logprobs ")) {
    rewritten = absl::StrCat("top_logprobs", message.substr(8));
  }
  return absl::StrReplaceAll(ToolFunctionPath(std::move(rewritten)),
                             {{"sampling.", ""},
                              {"stopping.", ""},
                              {"messages.add_generation_prompt", "add_generation_prompt"},
                              {"messages.continue_final_message", "continue_final_message"},
                              {"messages.tool_choice_function", "tool_choice"},
                              {"messages.tool_choice", "tool_choice"},
                              {"messages.tools", "tools"}});
}

OpenAiError InvalidRequest(const absl::Status& status, Endpoint endpoint) {
  OpenAiError error;
  error.http_status = 400;
  error.type = "invalid_request_error";
  if (absl::optional<absl::Cord> param = status.GetPayload(kParamPayload)) {
    error.message = std::string(status.message());
    error.param = std::string(*param);
    return error;
  }
  error.message = RewriteMessage(status.message(), endpoint);
  error.param = ParamOf(error.message);
  return error;
}

}  // namespace

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

OpenAiError ToOpenAiError(const absl::Status& status, Endpoint endpoint) {
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return InvalidRequest(status, endpoint);
    case absl::StatusCode::kFailedPrecondition:
      // A request this model cannot serve as asked (chat without a chat
      // template): the client's to change, not a server fault.
      return {400, std::move(message), "invalid_request_error", ParamOf(status.message()), ""};
    case absl::StatusCode::kUnauthenticated:
      return {401, std::move(message), "invalid_request_error", "", "invalid_api_key"};
    case absl::StatusCode::kNotFound:
      return {404, std::move(message), "invalid_request_error", "model", "model_not_found"};
    case absl::StatusCode::kResourceExhausted:
      return {429, std::move(message), "rate_limit_error", "", "rate_limit_exceeded"};
    case absl::StatusCode::kUnavailable:
      return {503, std::move(message), "service_unavailable_error", "", ""};
    default:
      return {500, std::move(message), "server_error", "", ""};
  }
}

std::string RenderErrorBody(const OpenAiError& error) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  const nlohmann::json body = {{"error",
                                {{"message", error.message},
                                 {"type", error.type},
                                 {"param", or_null(error.param)},
                                 {"code", or_null(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace loom::openai
