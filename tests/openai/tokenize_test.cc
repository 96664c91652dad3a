#include "openai/tokenize.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

// The OpenAI error the status becomes on the completions endpoint.
OpenAiError ErrorOf(const absl::Status& status) {
  return ToOpenAiError(status, Endpoint::kCompletions);
}

TEST(TokenizeTest, ParsesAPromptWithItsOptions) {
  const absl::StatusOr<TokenizeRequest> parsed =
      ParseTokenizeRequest(R"({"model": "m", "prompt": "hello", "add_special_tokens": false})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model, "m");
  EXPECT_EQ(parsed->request.text(), "hello");
  ASSERT_TRUE(parsed->request.has_add_special_tokens());
  EXPECT_FALSE(parsed->request.add_special_tokens());
}

TEST(TokenizeTest, ParsesMessagesWithTheChatParser) {
  const absl::StatusOr<TokenizeRequest> parsed = ParseTokenizeRequest(
      R"({"messages": [{"role": "system", "content": "be brief"},
                       {"role": "user", "content": [{"type": "text", "text": "hi"}]}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->model.empty());
  ASSERT_EQ(parsed->request.messages().messages_size(), 2);
  EXPECT_EQ(parsed->request.messages().messages(0).role(), "system");
  EXPECT_EQ(parsed->request.messages().messages(1).content(), "hi");
  EXPECT_FALSE(parsed->request.has_add_special_tokens());
}

TEST(TokenizeTest, NeedsExactlyOneOfPromptAndMessages) {
  for (const char* body : {R"({})", R"({"prompt": "a", "messages": []})", R"({"prompt": null})"}) {
    const absl::StatusOr<TokenizeRequest> parsed = ParseTokenizeRequest(body);
    ASSERT_FALSE(parsed.ok()) << body;
    const OpenAiError error = ErrorOf(parsed.status());
    EXPECT_EQ(error.http_status, 400) << body;
    EXPECT_EQ(error.param, "prompt") << body;
    EXPECT_EQ(error.message, "exactly one of prompt and messages must be given") << body;
  }
}

TEST(TokenizeTest, RejectsWrongTypes) {
  const absl::StatusOr<TokenizeRequest> prompt = ParseTokenizeRequest(R"({"prompt": 7})");
  ASSERT_FALSE(prompt.ok());
  EXPECT_EQ(ErrorOf(prompt.status()).param, "prompt");
  const absl::StatusOr<TokenizeRequest> special =
      ParseTokenizeRequest(R"({"prompt": "a", "add_special_tokens": "yes"})");
  ASSERT_FALSE(special.ok());
  EXPECT_EQ(ErrorOf(special.status()).param, "add_special_tokens");
  EXPECT_FALSE(ParseTokenizeRequest("[1, 2]").ok());
  EXPECT_FALSE(ParseTokenizeRequest("{\"prompt\": ").ok());
}

TEST(TokenizeTest, ParsesDetokenizeIdsAndChecksTheirRange) {
  const absl::StatusOr<DetokenizeRequest> parsed =
      ParseDetokenizeRequest(R"({"model": "m", "tokens": [0, 5, 2147483647]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model, "m");
  EXPECT_EQ(parsed->tokens, (std::vector<int32_t>{0, 5, 2147483647}));

  for (const char* body : {R"({"tokens": [1, -1]})", R"({"tokens": [2147483648]})",
                           R"({"tokens": [1.5]})", R"({"tokens": "1 2"})", R"({})"}) {
    const absl::StatusOr<DetokenizeRequest> bad = ParseDetokenizeRequest(body);
    ASSERT_FALSE(bad.ok()) << body;
    const OpenAiError error = ErrorOf(bad.status());
    EXPECT_EQ(error.http_status, 400) << body;
    EXPECT_EQ(error.param, "tokens") << body << ": " << error.message;
  }
}

TEST(TokenizeTest, RendersVllmShapes) {
  const std::vector<int32_t> ids = {1, 42};
  const std::vector<std::string> pieces = {"<s>", "hi"};
  const nlohmann::json tokenized = nlohmann::json::parse(RenderTokenizeResponse(ids, pieces, 512));
  EXPECT_EQ(tokenized, nlohmann::json::parse(
                           R"({"count": 2, "max_model_len": 512, "tokens": [1, 42],
                               "token_strs": ["<s>", "hi"]})"));
  EXPECT_EQ(nlohmann::json::parse(RenderDetokenizeResponse("a \"b\"")),
            nlohmann::json::parse(R"({"prompt": "a \"b\""})"));
  EXPECT_EQ(nlohmann::json::parse(RenderVersion("0.3.0")),
            nlohmann::json::parse(R"({"version": "0.3.0"})"));
}

}  // namespace
}  // namespace loom::openai
