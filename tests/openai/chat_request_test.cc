#include "openai/chat_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

using ::testing::HasSubstr;

ChatRequest Parse(const std::string& body) {
  absl::StatusOr<ChatRequest> parsed = ParseChatRequest(body);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : ChatRequest{};
}

OpenAiError ParseError(const std::string& body) {
  absl::StatusOr<ChatRequest> parsed = ParseChatRequest(body);
  EXPECT_FALSE(parsed.ok()) << body;
  return ToOpenAiError(parsed.status(), Endpoint::kChatCompletions);
}

TEST(ChatRequestTest, StringContent) {
  const ChatRequest parsed = Parse(R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello"},
      {"role": "user", "content": "Bye", "name": "ignored"}]})");
  const v1::ChatMessages& messages = parsed.request.messages();
  ASSERT_EQ(messages.messages_size(), 4);
  EXPECT_EQ(messages.messages(0).role(), "system");
  EXPECT_EQ(messages.messages(0).content(), "Be brief.");
  EXPECT_EQ(messages.messages(2).role(), "assistant");
  EXPECT_EQ(messages.messages(3).content(), "Bye");
  EXPECT_EQ(parsed.options.model, "m");
}

TEST(ChatRequestTest, TextPartsAreJoinedWithNewlines) {
  const ChatRequest parsed = Parse(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]})");
  EXPECT_EQ(parsed.request.messages().messages(0).content(), "one\ntwo");
}

TEST(ChatRequestTest, MissingOrNullContentIsEmptyOnAssistantTurns) {
  const ChatRequest parsed = Parse(R"({"messages": [{"role": "assistant", "content": null},
                                                     {"role": "assistant"}]})");
  EXPECT_EQ(parsed.request.messages().messages(0).content(), "");
  EXPECT_EQ(parsed.request.messages().messages(1).content(), "");
  EXPECT_EQ(Parse(R"({"messages": [{"role": "user", "content": ""}]})")
                .request.messages()
                .messages(0)
                .content(),
            "");
}

TEST(ChatRequestTest, OtherRolesNeedContent) {
  for (const std::string role : {"system", "user", "tool", "developer"}) {
    for (const std::string content : {"", R"(, "content": null)"}) {
      const OpenAiError error =
          ParseError(absl::StrCat(R"({"messages": [{"role": "user", "content": "hi"}, {"role": ")",
                                  role, "\"", content, "}]}"));
      EXPECT_EQ(error.http_status, 400);
      EXPECT_EQ(error.param, "messages[1].content");
      EXPECT_THAT(error.message, HasSubstr("messages[1].content is required for a "));
    }
  }
}

TEST(ChatRequestTest, DeveloperIsReadAsSystem) {
  const ChatRequest parsed = Parse(R"({"messages": [{"role": "developer", "content": "Be brief."},
                                                     {"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(parsed.request.messages().messages(0).role(), "system");
  EXPECT_EQ(parsed.request.messages().messages(0).content(), "Be brief.");
}

TEST(ChatRequestTest, RolesAreLeftToTheValidator) {
  EXPECT_EQ(Parse(R"({"messages": [{"role": "tool", "content": "x"}]})")
                .request.messages()
                .messages(0)
                .role(),
            "tool");
}

TEST(ChatRequestTest, EveryField) {
  const ChatRequest parsed = Parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
    "max_tokens": 10, "temperature": 0, "top_p": 0.5, "n": 2, "stop": "\n", "seed": 3,
    "presence_penalty": 1, "frequency_penalty": 1.5, "logit_bias": {"3": 1}, "user": "u",
    "logprobs": true, "top_logprobs": 4, "stream": true, "stream_options": {"include_usage": false},
    "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.2, "min_tokens": 1, "ignore_eos": true,
    "stop_token_ids": [7], "include_stop_str_in_output": true, "skip_special_tokens": true,
    "priority": 4, "cache_salt": "s", "truncate_prompt_tokens": 8})");
  const v1::GenerateRequest& r = parsed.request;
  EXPECT_EQ(r.stopping().max_tokens(), 10u);
  EXPECT_TRUE(r.sampling().has_temperature());
  EXPECT_FLOAT_EQ(r.sampling().temperature(), 0.0f);
  EXPECT_FLOAT_EQ(r.sampling().top_p(), 0.5f);
  EXPECT_EQ(r.sampling().n(), 2);
  EXPECT_EQ(r.stopping().stop(0), "\n");
  EXPECT_EQ(r.sampling().seed(), 3u);
  EXPECT_FLOAT_EQ(r.sampling().presence_penalty(), 1.0f);
  EXPECT_FLOAT_EQ(r.sampling().frequency_penalty(), 1.5f);
  EXPECT_FLOAT_EQ(r.sampling().logit_bias().at(3), 1.0f);
  EXPECT_EQ(r.logprobs(), 4);
  EXPECT_EQ(r.sampling().top_k(), 5);
  EXPECT_FLOAT_EQ(r.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(r.sampling().repetition_penalty(), 1.2f);
  EXPECT_EQ(r.stopping().min_tokens(), 1u);
  EXPECT_TRUE(r.stopping().ignore_eos());
  EXPECT_EQ(r.stopping().stop_token_ids(0), 7);
  EXPECT_TRUE(r.stopping().include_stop_str_in_output());
  EXPECT_EQ(r.priority(), 4);
  EXPECT_EQ(r.cache_salt(), "s");
  EXPECT_EQ(parsed.options.user, "u");
  EXPECT_EQ(parsed.options.n, 2);
  EXPECT_EQ(parsed.options.logprobs, 4);
  EXPECT_TRUE(parsed.options.stream);
  EXPECT_FALSE(parsed.options.include_usage);
  EXPECT_EQ(parsed.options.skip_special_tokens, true);
  EXPECT_EQ(parsed.options.truncate_prompt_tokens, 8);
}

TEST(ChatRequestTest, MaxCompletionTokensWinsOverMaxTokens) {
  const ChatRequest parsed = Parse(R"({"messages": [{"role": "user", "content": "x"}],
                                       "max_tokens": 10, "max_completion_tokens": 20})");
  EXPECT_EQ(parsed.request.stopping().max_tokens(), 20u);
  EXPECT_EQ(Parse(R"({"messages": [{"role": "user", "content": "x"}],
                      "max_completion_tokens": 30})")
                .request.stopping()
                .max_tokens(),
            30u);
}

TEST(ChatRequestTest, LogprobsWithoutTopLogprobsAsksForZeroAlternatives) {
  const ChatRequest parsed =
      Parse(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})");
  EXPECT_TRUE(parsed.request.has_logprobs());
  EXPECT_EQ(parsed.request.logprobs(), 0);
  EXPECT_EQ(parsed.options.logprobs, 0);
  const ChatRequest off =
      Parse(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false})");
  EXPECT_FALSE(off.request.has_logprobs());
  EXPECT_FALSE(off.options.logprobs.has_value());
}

TEST(ChatRequestTest, PromptLogprobsIsVllmsExtraField) {
  const ChatRequest parsed =
      Parse(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 3})");
  EXPECT_EQ(parsed.request.prompt_logprobs(), 3);
  EXPECT_EQ(parsed.options.prompt_logprobs, 3);
  EXPECT_FALSE(
      Parse(R"({"messages": [{"role": "user", "content": "x"}]})").request.has_prompt_logprobs());
}

TEST(ChatRequestTest, Errors) {
  const struct {
    const char* body;
    const char* param;
    const char* message;
  } cases[] = {
      {R"({})", "messages", "messages is required"},
      {R"({"messages": "hi"})", "messages", "messages must be an array"},
      {R"({"messages": ["hi"]})", "messages[0]", "messages[0] must be an object"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role", "must be a string"},
      {R"({"messages": [{"role": 1, "content": "x"}]})", "messages[0].role", "must be a string"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "a string or an array of content parts"},
      {R"({"messages": [{"role": "user", "content": ["x"]}]})", "messages[0].content[0]",
       "must be an object"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type", "must be \"text\""},
      {R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})",
       "messages[0].content[0].type", "must be \"text\""},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})",
       "messages[0].content[0].text", "must be a string"},
      {R"({"messages": [], "logprobs": 1})", "logprobs", "logprobs must be a boolean"},
      {R"({"messages": [], "top_logprobs": 2})", "top_logprobs", "requires logprobs"},
      {R"({"messages": [], "logprobs": true, "top_logprobs": "2"})", "top_logprobs",
       "must be an integer"},
      {R"({"messages": [], "max_completion_tokens": -5})", "max_completion_tokens",
       "must be an integer in"},
      {R"({"messages": [], "temperature": "0"})", "temperature", "must be a number"},
  };
  for (const auto& c : cases) {
    const OpenAiError error = ParseError(c.body);
    EXPECT_EQ(error.http_status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_THAT(error.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(ChatRequestTest, GenerationPromptAndContinueFinalMessage) {
  const std::string turns =
      R"("messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}])";
  const ChatRequest plain = Parse("{" + turns + "}");
  EXPECT_FALSE(plain.request.messages().has_add_generation_prompt());
  EXPECT_FALSE(plain.request.messages().continue_final_message());
  const ChatRequest open =
      Parse("{" + turns + R"(, "add_generation_prompt": false, "continue_final_message": true})");
  EXPECT_TRUE(open.request.messages().has_add_generation_prompt());
  EXPECT_FALSE(open.request.messages().add_generation_prompt());
  EXPECT_TRUE(open.request.messages().continue_final_message());
  EXPECT_EQ(ParseError("{" + turns + R"(, "add_generation_prompt": "no"})").param,
            "add_generation_prompt");
  EXPECT_EQ(ParseError("{" + turns + R"(, "continue_final_message": 1})").param,
            "continue_final_message");
}

}  // namespace
}  // namespace loom::openai
