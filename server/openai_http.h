// The OpenAI API on loomd's HTTP port: GET /v1/models, POST /v1/completions
// and /v1/chat/completions, and vLLM's /tokenize, /detokenize and /version.
// Bodies are parsed by openai/ into loom.v1 requests, which then pass the same
// RequestIntake (drain check, validation, request building) as gRPC calls and
// go to the same engine; HttpGeneration writes the responses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "openai/openai_error.h"
#include "server/api_keys.h"
#include "server/generation_backend.h"
#include "server/http_generation.h"
#include "server/http_server.h"
#include "server/model_frontend.h"
#include "server/request_intake.h"
#include "tool_calls/tool_call_format.h"

namespace loom {

struct OpenAiHttpOptions {
  HttpGenerationLimits limits;
  std::string version;  // for /version
  int64_t created = 0;  // Unix seconds the model was loaded, for /v1/models
  // --api_keys_file: every route needs "Authorization: Bearer <key>" (401
  // otherwise); null when auth is off. Outlives the routes.
  const ApiKeyStore* api_keys = nullptr;
  // How the model writes tool calls: chat replies to requests with tools
  // (tool_choice other than "none") are parsed in this format.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

class OpenAiHttp {
 public:
  // All must outlive the routes.
  OpenAiHttp(const ModelFrontend& model, RequestIntake& intake, GenerationBackend& backend,
             OpenAiHttpOptions options);

  std::vector<HttpServer::Route> Routes();

 private:
  // Each route's handler, after the API key check: caller is who sent it.
  void Models(const HttpRequest& request, const Caller& caller,
              const std::shared_ptr<HttpExchange>& exchange) const;
  void Completions(const HttpRequest& request, const Caller& caller,
                   const std::shared_ptr<HttpExchange>& exchange);
  void ChatCompletions(const HttpRequest& request, const Caller& caller,
                       const std::shared_ptr<HttpExchange>& exchange);
  void Tokenize(const HttpRequest& request, const Caller& caller,
                const std::shared_ptr<HttpExchange>& exchange) const;
  void Detokenize(const HttpRequest& request, const Caller& caller,
                  const std::shared_ptr<HttpExchange>& exchange) const;
  void Version(const HttpRequest& request, const Caller& caller,
               const std::shared_ptr<HttpExchange>& exchange) const;

  // NOT_FOUND unless `model` is empty or the served model's name.
  absl::Status CheckModel(const std::string& model) const;
  // The ResponseContext of a request whose first engine request id is `id`.
  openai::ResponseContext Context(std::string prefix, const std::string& id,
                                  const openai::OpenAiOptions& options) const;

  const ModelFrontend& model_;
  RequestIntake& intake_;
  GenerationBackend& backend_;
  const OpenAiHttpOptions options_;
};

// Answers status as OpenAI's error body with its HTTP status.
void RespondOpenAiError(HttpExchange& exchange, const absl::Status& status,
                        openai::Endpoint endpoint);

}  // namespace loom
