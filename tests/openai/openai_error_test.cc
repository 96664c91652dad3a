#include "openai/openai_error.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "openai/sse.h"

namespace loom::openai {
namespace {

TEST(OpenAiErrorTest, InvalidArgumentNamesTheOpenAiParameter) {
  const struct {
    const char* message;
    const char* param;
    const char* rewritten;
  } cases[] = {
      {"sampling.temperature must be in [0, 100]; got 250", "temperature",
       "temperature must be in [0, 100]; got 250"},
      {"sampling.top_p must be in (0, 1]; got 2", "top_p", "top_p must be in (0, 1]; got 2"},
      {"sampling.n must be in [1, 16]; got 100", "n", "n must be in [1, 16]; got 100"},
      {"sampling.logit_bias key must be a token id in [0, 10); got 99", "logit_bias",
       "logit_bias key must be a token id in [0, 10); got 99"},
      {"sampling.logit_bias[3] must be in [-100, 100]; got 200", "logit_bias",
       "logit_bias[3] must be in [-100, 100]; got 200"},
      {"stopping.max_tokens must be >= 1; got 0", "max_tokens", "max_tokens must be >= 1; got 0"},
      {"stopping.stop[2] must be 1..256 bytes long; got 0 bytes", "stop",
       "stop[2] must be 1..256 bytes long; got 0 bytes"},
      {"stopping.stop_token_ids[0] must be a token id", "stop_token_ids",
       "stop_token_ids[0] must be a token id"},
      {"prompt_token_ids.ids[1] must be a token id in [0, 10); got -1", "prompt",
       "prompt[1] must be a token id in [0, 10); got -1"},
      {"stopping.min_tokens must be in [0, stopping.max_tokens] = [0, 2]; got 3", "min_tokens",
       "min_tokens must be in [0, max_tokens] = [0, 2]; got 3"},
      {"prompt must not be empty", "prompt", "prompt must not be empty"},
      {"messages.messages[0].role must be one of system, user, assistant, tool; got \"x\"",
       "messages", "messages[0].role must be one of system, user, assistant, tool; got \"x\""},
      {"messages (turns and tools together) must have at most 10 bytes", "messages",
       "messages (turns and tools together) must have at most 10 bytes"},
      {"messages.tools[2].parameters: at /properties/x: unsupported keyword", "tools",
       "tools[2].function.parameters: at /properties/x: unsupported keyword"},
      {"messages.tools[0].name must match [A-Za-z0-9_-]{1,64}; got \"a b\"", "tools",
       "tools[0].function.name must match [A-Za-z0-9_-]{1,64}; got \"a b\""},
      {"messages.tool_choice_function must name one of messages.tools; got \"f\"", "tool_choice",
       "tool_choice must name one of tools; got \"f\""},
      {"truncate must be one of", "truncate_prompt_tokens",
       "truncate_prompt_tokens must be one of"},
      {"priority must be in [-1000000, 1000000]; got 5000000", "priority",
       "priority must be in [-1000000, 1000000]; got 5000000"},
      {"logprobs must be in [0, 20]; got 50", "logprobs", "logprobs must be in [0, 20]; got 50"},
      {"input must be set: one of prompt, prompt_token_ids or messages", "",
       "input must be set: one of prompt, prompt_token_ids or messages"},
  };
  for (const auto& c : cases) {
    const OpenAiError error =
        ToOpenAiError(absl::InvalidArgumentError(c.message), Endpoint::kCompletions);
    EXPECT_EQ(error.http_status, 400) << c.message;
    EXPECT_EQ(error.type, "invalid_request_error");
    EXPECT_EQ(error.param, c.param) << c.message;
    EXPECT_EQ(error.message, c.rewritten);
    EXPECT_EQ(error.code, "");
  }
}

TEST(OpenAiErrorTest, ChatLogprobsIsTopLogprobs) {
  const OpenAiError error =
      ToOpenAiError(absl::InvalidArgumentError("logprobs must be in [0, 20]; got 50"),
                    Endpoint::kChatCompletions);
  EXPECT_EQ(error.param, "top_logprobs");
  EXPECT_EQ(error.message, "top_logprobs must be in [0, 20]; got 50");
}

TEST(OpenAiErrorTest, InvalidParamKeepsItsParameter) {
  const OpenAiError error =
      ToOpenAiError(InvalidParam("messages[0].content", "bad content"), Endpoint::kChatCompletions);
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.param, "messages[0].content");
  EXPECT_EQ(error.message, "bad content");
}

TEST(OpenAiErrorTest, StatusCodes) {
  const struct {
    absl::Status status;
    int http_status;
    const char* type;
    const char* param;
    const char* code;
  } cases[] = {
      {absl::NotFoundError("model \"x\" is not served"), 404, "invalid_request_error", "model",
       "model_not_found"},
      {absl::ResourceExhaustedError("queue full"), 429, "rate_limit_error", "",
       "rate_limit_exceeded"},
      {absl::UnavailableError("draining"), 503, "service_unavailable_error", "", ""},
      {absl::FailedPreconditionError("messages: the model has no chat template"), 400,
       "invalid_request_error", "messages", ""},
      {absl::InternalError("engine failed"), 500, "server_error", "", ""},
      {absl::UnknownError("?"), 500, "server_error", "", ""},
  };
  for (const auto& c : cases) {
    const OpenAiError error = ToOpenAiError(c.status, Endpoint::kCompletions);
    EXPECT_EQ(error.http_status, c.http_status) << c.status;
    EXPECT_EQ(error.type, c.type);
    EXPECT_EQ(error.param, c.param);
    EXPECT_EQ(error.code, c.code);
    EXPECT_EQ(error.message, c.status.message());
  }
}

TEST(OpenAiErrorTest, RenderErrorBody) {
  const OpenAiError error{400, "temperature must be a number", "invalid_request_error",
                          "temperature", ""};
  EXPECT_EQ(nlohmann::json::parse(RenderErrorBody(error)), nlohmann::json::parse(R"({
    "error": {"message": "temperature must be a number", "type": "invalid_request_error",
              "param": "temperature", "code": null}})"));
  const OpenAiError not_found{404, "no such model", "invalid_request_error", "model",
                              "model_not_found"};
  EXPECT_EQ(nlohmann::json::parse(RenderErrorBody(not_found)), nlohmann::json::parse(R"({
    "error": {"message": "no such model", "type": "invalid_request_error",
              "param": "model", "code": "model_not_found"}})"));
}

TEST(OpenAiErrorTest, SseErrorEvent) {
  const OpenAiError error{500, "engine failed", "server_error", "", ""};
  EXPECT_EQ(SseErrorEvent(error),
            "data: {\"error\":{\"code\":null,\"message\":\"engine failed\",\"param\":null,"
            "\"type\":\"server_error\"}}\n\n");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
  EXPECT_EQ(SseFrame("{}"), "data: {}\n\n");
}

}  // namespace
}  // namespace loom::openai
