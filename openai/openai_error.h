// OpenAI's error object and the one mapping from Loom's absl::Status codes
// (docs/api.md, "OpenAI HTTP API (protocol)") to HTTP statuses and OpenAI
// error bodies. Parse errors of this module are INVALID_ARGUMENT statuses that
// carry the OpenAI parameter name, so that they map through the same path.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace loom::openai {

enum class Endpoint { kCompletions, kChatCompletions };

struct OpenAiError {
  int http_status = 500;
  std::string message;
  std::string type;
  std::string param;  // empty renders as null
  std::string code;   // empty renders as null
};

// INVALID_ARGUMENT naming an OpenAI request parameter, e.g.
// InvalidParam("temperature", "temperature must be a number").
absl::Status InvalidParam(absl::string_view param, absl::string_view message);

// INVALID_ARGUMENT -> 400, UNAUTHENTICATED -> 401 (code invalid_api_key),
// NOT_FOUND -> 404, RESOURCE_EXHAUSTED -> 429,
// UNAVAILABLE -> 503, everything else -> 500. Proto field paths at the start of
// the validator's messages ("sampling.temperature must be ...") become the
// OpenAI parameter names ("temperature"); `endpoint` decides names that differ
// between the two APIs (proto `logprobs` is chat's `top_logprobs`).
OpenAiError ToOpenAiError(const absl::Status& status, Endpoint endpoint);

// {"error": {"message", "type", "param", "code"}}
std::string RenderErrorBody(const OpenAiError& error);

}  // namespace loom::openai
