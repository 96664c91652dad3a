#include "server/openai_http.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "openai/chat_request.h"
#include "openai/completion_request.h"
#include "openai/models_response.h"
#include "openai/structured_output.h"
#include "openai/tokenize.h"

namespace loom {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kCompletionsRoute[] = "/v1/completions";
constexpr char kChatRoute[] = "/v1/chat/completions";

// vLLM's truncate_prompt_tokens = k >= 1 keeps the prompt's last k tokens.
// The request was built with TRUNCATION_LEFT, so a prompt longer than the
// model accepts was cut to fit first; the tighter cut comes on top.
void KeepLastTokens(const std::optional<int32_t>& keep, RequestParams& params) {
  if (!keep.has_value() || *keep < 1) {
    return;
  }
  std::vector<int32_t>& ids = params.prompt_token_ids;
  const size_t k = static_cast<size_t>(*keep);
  if (ids.size() > k) {
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(k));
  }
}

// The request id: the client's X-Request-Id when given, with the prompt's
// number when one request carries several prompts.
void SetRequestId(const HttpRequest& http, size_t prompt, size_t num_prompts,
                  v1::GenerateRequest& request) {
  const std::string_view header = http.Header("x-request-id");
  if (header.empty()) {
    return;
  }
  const std::string id(header);
  request.set_request_id(num_prompts > 1 ? absl::StrCat(id, "-", prompt) : id);
}

// The format a chat's reply is parsed in for tool calls: none without tools
// or with tool_choice "none"; "auto" needs the model's format; forced calls
// are written in ForcedCallFormat (request_constraint.cc), read in the same.
absl::StatusOr<ToolCallFormat> ReplyToolCalls(const v1::ChatMessages& messages,
                                              ToolCallFormat format) {
  if (messages.tools().empty() || messages.tool_choice() == v1::TOOL_CHOICE_NONE) {
    return ToolCallFormat::kNone;
  }
  const bool forced = messages.tool_choice() == v1::TOOL_CHOICE_REQUIRED ||
                      messages.tool_choice() == v1::TOOL_CHOICE_FUNCTION;
  if (format == ToolCallFormat::kNone && !forced) {
    return openai::InvalidParam(
        "tool_choice",
        "tool_choice \"auto\" needs the model's tool-call format to read calls from its "
        "reply: start loomd with --tool_call_parser (hermes, llama3_json) or a "
        "--chat_template whose tools section names one; or send tool_choice \"none\"");
  }
  return forced ? ForcedCallFormat(format) : format;
}

}  // namespace

void RespondOpenAiError(HttpExchange& exchange, const absl::Status& status,
                        openai::Endpoint endpoint) {
  const openai::OpenAiError error = openai::ToOpenAiError(status, endpoint);
  exchange.Respond(error.http_status, kJson, openai::RenderErrorBody(error));
}

OpenAiHttp::OpenAiHttp(const ModelFrontend& model, RequestIntake& intake,
                       GenerationBackend& backend, OpenAiHttpOptions options)
    : model_(model), intake_(intake), backend_(backend), options_(std::move(options)) {}

std::vector<HttpServer::Route> OpenAiHttp::Routes() {
  // Every route checks the API key first (when auth is on): a rejected
  // request reaches neither the model nor the engine.
  auto bind = [this](auto method) {
    return [this, method](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
      absl::StatusOr<Caller> caller = Caller{};
      if (options_.api_keys != nullptr) {
        caller = options_.api_keys->Authenticate(request.Header("authorization"));
      }
      if (!caller.ok()) {
        return RespondOpenAiError(*exchange, caller.status(), openai::Endpoint::kCompletions);
      }
      (this->*method)(request, *caller, exchange);
    };
  };
  std::vector<HttpServer::Route> routes;
  routes.push_back({"GET", "/v1/models", bind(&OpenAiHttp::Models)});
  routes.push_back({"POST", kCompletionsRoute, bind(&OpenAiHttp::Completions)});
  routes.push_back({"POST", kChatRoute, bind(&OpenAiHttp::ChatCompletions)});
  routes.push_back({"POST", "/tokenize", bind(&OpenAiHttp::Tokenize)});
  routes.push_back({"POST", "/detokenize", bind(&OpenAiHttp::Detokenize)});
  routes.push_back({"GET", "/version", bind(&OpenAiHttp::Version)});
  return routes;
}

absl::Status OpenAiHttp::CheckModel(const std::string& model) const {
  if (model.empty() || model == model_.Info().name()) {
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("The model `", model, "` does not exist; this server ",
                                          "serves `", model_.Info().name(), "`"));
}

openai::ResponseContext OpenAiHttp::Context(std::string prefix, const std::string& id,
                                            const openai::OpenAiOptions& options) const {
  openai::ResponseContext context;
  context.id = std::move(prefix) + id;
  context.created = absl::ToUnixSeconds(absl::Now());
  context.model = model_.Info().name();
  context.options = options;
  context.token_text = [&model = model_](int32_t id) {
    const int32_t ids[] = {id};
    return model.Decode(ids);
  };
  return context;
}

void OpenAiHttp::Version(const HttpRequest& /*request*/, const Caller& /*caller*/,
                         const std::shared_ptr<HttpExchange>& exchange) const {
  exchange->Respond(200, kJson, openai::RenderVersion(options_.version));
}

void OpenAiHttp::Models(const HttpRequest& /*request*/, const Caller& /*caller*/,
                        const std::shared_ptr<HttpExchange>& exchange) const {
  const v1::ModelInfo models[] = {model_.Info()};
  exchange->Respond(200, kJson, openai::RenderModelList(models, options_.created));
}

void OpenAiHttp::Completions(const HttpRequest& request, const Caller& caller,
                             const std::shared_ptr<HttpExchange>& exchange) {
  constexpr openai::Endpoint kEndpoint = openai::Endpoint::kCompletions;
  absl::StatusOr<openai::CompletionRequest> parsed = openai::ParseCompletionRequest(request.body);
  if (!parsed.ok()) {
    return RespondOpenAiError(*exchange, parsed.status(), kEndpoint);
  }
  if (absl::Status model = CheckModel(parsed->options.model); !model.ok()) {
    return RespondOpenAiError(*exchange, model, kEndpoint);
  }
  const size_t num_prompts = parsed->prompts.size();
  std::vector<RequestParams> prompts;
  std::vector<std::string> echo;
  for (size_t p = 0; p < num_prompts; ++p) {
    v1::GenerateRequest& prompt = parsed->prompts[p];
    SetRequestId(request, p, num_prompts, prompt);
    absl::StatusOr<RequestParams> params = intake_.Prepare(prompt, absl::InfiniteFuture(), caller);
    if (!params.ok()) {
      return RespondOpenAiError(
          *exchange, openai::RenameConstraintError(params.status(), parsed->options), kEndpoint);
    }
    KeepLastTokens(parsed->options.truncate_prompt_tokens, *params);
    if (parsed->options.echo) {
      echo.push_back(prompt.has_prompt() ? prompt.prompt()
                                         : model_.Decode(params->prompt_token_ids));
    }
    prompts.push_back(*std::move(params));
  }
  auto generation = std::make_shared<HttpGeneration>(
      backend_, exchange, Context("cmpl-", prompts.front().request_id, parsed->options), kEndpoint,
      kCompletionsRoute, options_.limits);
  generation->Start(std::move(prompts), std::move(echo));
}

void OpenAiHttp::ChatCompletions(const HttpRequest& request, const Caller& caller,
                                 const std::shared_ptr<HttpExchange>& exchange) {
  constexpr openai::Endpoint kEndpoint = openai::Endpoint::kChatCompletions;
  absl::StatusOr<openai::ChatRequest> parsed = openai::ParseChatRequest(request.body);
  if (!parsed.ok()) {
    return RespondOpenAiError(*exchange, parsed.status(), kEndpoint);
  }
  if (absl::Status model = CheckModel(parsed->options.model); !model.ok()) {
    return RespondOpenAiError(*exchange, model, kEndpoint);
  }
  SetRequestId(request, 0, 1, parsed->request);
  const absl::StatusOr<ToolCallFormat> tool_calls =
      ReplyToolCalls(parsed->request.messages(), options_.tool_call_format);
  if (!tool_calls.ok()) {
    return RespondOpenAiError(*exchange, tool_calls.status(), kEndpoint);
  }
  absl::StatusOr<RequestParams> params =
      intake_.Prepare(parsed->request, absl::InfiniteFuture(), caller);
  if (!params.ok()) {
    return RespondOpenAiError(
        *exchange, openai::RenameConstraintError(params.status(), parsed->options), kEndpoint);
  }
  KeepLastTokens(parsed->options.truncate_prompt_tokens, *params);
  auto generation = std::make_shared<HttpGeneration>(
      backend_, exchange, Context("chatcmpl-", params->request_id, parsed->options), kEndpoint,
      kChatRoute, options_.limits, *tool_calls);
  std::vector<RequestParams> prompts;
  prompts.push_back(*std::move(params));
  generation->Start(std::move(prompts), {});
}

void OpenAiHttp::Tokenize(const HttpRequest& request, const Caller& /*caller*/,
                          const std::shared_ptr<HttpExchange>& exchange) const {
  constexpr openai::Endpoint kEndpoint = openai::Endpoint::kCompletions;
  absl::StatusOr<openai::TokenizeRequest> parsed = openai::ParseTokenizeRequest(request.body);
  if (!parsed.ok()) {
    return RespondOpenAiError(*exchange, parsed.status(), kEndpoint);
  }
  if (absl::Status model = CheckModel(parsed->model); !model.ok()) {
    return RespondOpenAiError(*exchange, model, kEndpoint);
  }
  absl::StatusOr<std::vector<int32_t>> ids = intake_.Tokenize(parsed->request);
  if (!ids.ok()) {
    return RespondOpenAiError(*exchange, ids.status(), kEndpoint);
  }
  std::vector<std::string> pieces;
  pieces.reserve(ids->size());
  for (int32_t id : *ids) {
    pieces.push_back(model_.TokenToPiece(id));
  }
  exchange->Respond(200, kJson,
                    openai::RenderTokenizeResponse(*ids, pieces, model_.Info().max_model_len()));
}

void OpenAiHttp::Detokenize(const HttpRequest& request, const Caller& /*caller*/,
                            const std::shared_ptr<HttpExchange>& exchange) const {
  constexpr openai::Endpoint kEndpoint = openai::Endpoint::kCompletions;
  absl::StatusOr<openai::DetokenizeRequest> parsed = openai::ParseDetokenizeRequest(request.body);
  if (!parsed.ok()) {
    return RespondOpenAiError(*exchange, parsed.status(), kEndpoint);
  }
  if (absl::Status model = CheckModel(parsed->model); !model.ok()) {
    return RespondOpenAiError(*exchange, model, kEndpoint);
  }
  const int64_t vocab = model_.Info().vocab_size();
  for (size_t i = 0; i < parsed->tokens.size(); ++i) {
    if (parsed->tokens[i] >= vocab) {
      return RespondOpenAiError(
          *exchange,
          openai::InvalidParam("tokens", absl::StrCat("tokens[", i, "] must be in [0, ", vocab - 1,
                                                      "]; got ", parsed->tokens[i])),
          kEndpoint);
    }
  }
  if (absl::Status accepting = intake_.CheckAccepting(); !accepting.ok()) {
    return RespondOpenAiError(*exchange, accepting, kEndpoint);
  }
  exchange->Respond(200, kJson, openai::RenderDetokenizeResponse(model_.Decode(parsed->tokens)));
}

}  // namespace loom
