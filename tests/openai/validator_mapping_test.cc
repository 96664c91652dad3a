// OpenAI bodies through the parsers and the server's one validator: range
// errors come back as 400s naming the OpenAI parameter.
#include <string>

#include "gtest/gtest.h"
#include "openai/chat_request.h"
#include "openai/completion_request.h"
#include "openai/openai_error.h"
#include "server/request_validator.h"

namespace loom::openai {
namespace {

constexpr int32_t kVocabSize = 1000;

OpenAiError CompletionError(const std::string& fields) {
  absl::StatusOr<CompletionRequest> parsed =
      ParseCompletionRequest(R"({"prompt": "hi", )" + fields + "}");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return {};
  const absl::Status status = ValidateGenerateRequest(parsed->prompts[0], kVocabSize);
  EXPECT_FALSE(status.ok()) << fields;
  return ToOpenAiError(status, Endpoint::kCompletions);
}

TEST(ValidatorMappingTest, CompletionRangesNameTheOpenAiParameter) {
  const struct {
    const char* fields;
    const char* param;
  } cases[] = {
      {R"("temperature": 250)", "temperature"},
      {R"("top_p": 0)", "top_p"},
      {R"("top_k": -5)", "top_k"},
      {R"("min_p": 2)", "min_p"},
      {R"("repetition_penalty": 0)", "repetition_penalty"},
      {R"("presence_penalty": 3)", "presence_penalty"},
      {R"("frequency_penalty": -3)", "frequency_penalty"},
      {R"("n": 0)", "n"},
      {R"("logit_bias": {"5000": 1})", "logit_bias"},
      {R"("logit_bias": {"5": 500})", "logit_bias"},
      {R"("max_tokens": 0)", "max_tokens"},
      {R"("max_tokens": 2, "min_tokens": 3)", "min_tokens"},
      {R"("stop": [""])", "stop"},
      {R"("stop_token_ids": [5000])", "stop_token_ids"},
      {R"("logprobs": 50)", "logprobs"},
      {R"("priority": 5000000)", "priority"},
  };
  for (const auto& c : cases) {
    const OpenAiError error = CompletionError(c.fields);
    EXPECT_EQ(error.http_status, 400) << c.fields;
    EXPECT_EQ(error.type, "invalid_request_error") << c.fields;
    EXPECT_EQ(error.param, c.param) << c.fields << ": " << error.message;
    EXPECT_EQ(error.message.find("sampling."), std::string::npos) << error.message;
    EXPECT_EQ(error.message.find("stopping."), std::string::npos) << error.message;
  }
}

TEST(ValidatorMappingTest, TokenPromptAndMessages) {
  absl::StatusOr<CompletionRequest> tokens = ParseCompletionRequest(R"({"prompt": [1, 5000]})");
  ASSERT_TRUE(tokens.ok());
  const OpenAiError token_error = ToOpenAiError(
      ValidateGenerateRequest(tokens->prompts[0], kVocabSize), Endpoint::kCompletions);
  EXPECT_EQ(token_error.param, "prompt");

  absl::StatusOr<ChatRequest> chat = ParseChatRequest(
      R"({"messages": [{"role": "robot", "content": "x"}], "logprobs": true, "top_logprobs": 2})");
  ASSERT_TRUE(chat.ok());
  const OpenAiError role_error =
      ToOpenAiError(ValidateGenerateRequest(chat->request, kVocabSize), Endpoint::kChatCompletions);
  EXPECT_EQ(role_error.param, "messages");

  absl::StatusOr<ChatRequest> top = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 99})");
  ASSERT_TRUE(top.ok());
  const OpenAiError top_error =
      ToOpenAiError(ValidateGenerateRequest(top->request, kVocabSize), Endpoint::kChatCompletions);
  EXPECT_EQ(top_error.param, "top_logprobs");

  absl::StatusOr<ChatRequest> both = ParseChatRequest(
      R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true,
          "add_generation_prompt": true})");
  ASSERT_TRUE(both.ok());
  const OpenAiError both_error =
      ToOpenAiError(ValidateGenerateRequest(both->request, kVocabSize), Endpoint::kChatCompletions);
  EXPECT_EQ(both_error.param, "continue_final_message");
  EXPECT_EQ(both_error.message.find("messages."), std::string::npos) << both_error.message;

  absl::StatusOr<ChatRequest> empty = ParseChatRequest(R"({"messages": []})");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(
      ToOpenAiError(ValidateGenerateRequest(empty->request, kVocabSize), Endpoint::kChatCompletions)
          .param,
      "messages");
}

TEST(ValidatorMappingTest, ValidRequestsPass) {
  absl::StatusOr<CompletionRequest> parsed = ParseCompletionRequest(
      R"({"prompt": ["a", "b"], "temperature": 0.7, "top_k": -1, "n": 2, "max_tokens": 8})");
  ASSERT_TRUE(parsed.ok());
  for (const v1::GenerateRequest& request : parsed->prompts) {
    EXPECT_TRUE(ValidateGenerateRequest(request, kVocabSize).ok());
  }
}

}  // namespace
}  // namespace loom::openai
