#include "openai/completion_request.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CompletionRequest Parse(const std::string& body) {
  absl::StatusOr<CompletionRequest> parsed = ParseCompletionRequest(body);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : CompletionRequest{};
}

OpenAiError ParseError(const std::string& body) {
  absl::StatusOr<CompletionRequest> parsed = ParseCompletionRequest(body);
  EXPECT_FALSE(parsed.ok()) << body;
  return ToOpenAiError(parsed.status(), Endpoint::kCompletions);
}

TEST(CompletionRequestTest, StringPrompt) {
  const CompletionRequest parsed = Parse(R"({"model": "m", "prompt": "Hello"})");
  ASSERT_EQ(parsed.prompts.size(), 1u);
  EXPECT_EQ(parsed.prompts[0].prompt(), "Hello");
  EXPECT_EQ(parsed.options.model, "m");
  EXPECT_FALSE(parsed.options.stream);
  EXPECT_EQ(parsed.options.n, 1);
  EXPECT_FALSE(parsed.options.logprobs.has_value());
}

TEST(CompletionRequestTest, ArrayOfStringsIsOneRequestPerPrompt) {
  const CompletionRequest parsed =
      Parse(R"({"prompt": ["a", "b"], "temperature": 0.5, "max_tokens": 7})");
  ASSERT_EQ(parsed.prompts.size(), 2u);
  EXPECT_EQ(parsed.prompts[0].prompt(), "a");
  EXPECT_EQ(parsed.prompts[1].prompt(), "b");
  for (const v1::GenerateRequest& request : parsed.prompts) {
    EXPECT_FLOAT_EQ(request.sampling().temperature(), 0.5f);
    EXPECT_EQ(request.stopping().max_tokens(), 7u);
  }
}

TEST(CompletionRequestTest, TokenIdsPrompt) {
  const CompletionRequest parsed = Parse(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(parsed.prompts.size(), 1u);
  EXPECT_THAT(parsed.prompts[0].prompt_token_ids().ids(), ElementsAre(1, 2, 3));
}

TEST(CompletionRequestTest, ArrayOfTokenIdArrays) {
  const CompletionRequest parsed = Parse(R"({"prompt": [[1, 2], [3]], "seed": 9})");
  ASSERT_EQ(parsed.prompts.size(), 2u);
  EXPECT_THAT(parsed.prompts[0].prompt_token_ids().ids(), ElementsAre(1, 2));
  EXPECT_THAT(parsed.prompts[1].prompt_token_ids().ids(), ElementsAre(3));
  EXPECT_EQ(parsed.prompts[1].sampling().seed(), 9u);
}

TEST(CompletionRequestTest, EveryOpenAiField) {
  const CompletionRequest parsed = Parse(R"({
    "model": "llama", "prompt": "x", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9,
    "n": 3, "stop": ["\n", "END"], "seed": -1, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "logit_bias": {"50256": -100, "7": 2.5}, "user": "u-1",
    "logprobs": 5, "echo": true, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(parsed.prompts.size(), 1u);
  const v1::GenerateRequest& r = parsed.prompts[0];
  EXPECT_EQ(r.stopping().max_tokens(), 16u);
  EXPECT_FLOAT_EQ(r.sampling().temperature(), 0.7f);
  EXPECT_FLOAT_EQ(r.sampling().top_p(), 0.9f);
  EXPECT_EQ(r.sampling().n(), 3);
  EXPECT_THAT(r.stopping().stop(), ElementsAre("\n", "END"));
  EXPECT_EQ(r.sampling().seed(), ~uint64_t{0});
  EXPECT_FLOAT_EQ(r.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(r.sampling().frequency_penalty(), -0.5f);
  ASSERT_EQ(r.sampling().logit_bias_size(), 2);
  EXPECT_FLOAT_EQ(r.sampling().logit_bias().at(50256), -100.0f);
  EXPECT_FLOAT_EQ(r.sampling().logit_bias().at(7), 2.5f);
  EXPECT_EQ(r.logprobs(), 5);
  EXPECT_EQ(parsed.options.model, "llama");
  EXPECT_EQ(parsed.options.user, "u-1");
  EXPECT_EQ(parsed.options.n, 3);
  EXPECT_EQ(parsed.options.logprobs, 5);
  EXPECT_TRUE(parsed.options.echo);
  EXPECT_TRUE(parsed.options.stream);
  EXPECT_TRUE(parsed.options.include_usage);
}

TEST(CompletionRequestTest, StopAsString) {
  const CompletionRequest parsed = Parse(R"({"prompt": "x", "stop": "###"})");
  EXPECT_THAT(parsed.prompts[0].stopping().stop(), ElementsAre("###"));
}

TEST(CompletionRequestTest, VllmExtraFields) {
  const CompletionRequest parsed = Parse(R"({
    "prompt": "x", "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2,
    "ignore_eos": true, "stop_token_ids": [2, 32000], "include_stop_str_in_output": true,
    "skip_special_tokens": false, "priority": -3, "cache_salt": "salt",
    "truncate_prompt_tokens": 100, "add_special_tokens": false})");
  const v1::GenerateRequest& r = parsed.prompts[0];
  EXPECT_EQ(r.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(r.sampling().min_p(), 0.05f);
  EXPECT_FLOAT_EQ(r.sampling().repetition_penalty(), 1.1f);
  EXPECT_EQ(r.stopping().min_tokens(), 2u);
  EXPECT_TRUE(r.stopping().ignore_eos());
  EXPECT_THAT(r.stopping().stop_token_ids(), ElementsAre(2, 32000));
  EXPECT_TRUE(r.stopping().include_stop_str_in_output());
  EXPECT_EQ(r.priority(), -3);
  EXPECT_EQ(r.cache_salt(), "salt");
  EXPECT_FALSE(r.add_special_tokens());
  EXPECT_EQ(r.truncate(), v1::TRUNCATION_UNSPECIFIED);
  EXPECT_EQ(parsed.options.skip_special_tokens, false);
  EXPECT_EQ(parsed.options.truncate_prompt_tokens, 100);
}

TEST(CompletionRequestTest, PromptLogprobs) {
  const CompletionRequest parsed = Parse(R"({"prompt": "x", "prompt_logprobs": 2})");
  EXPECT_EQ(parsed.prompts[0].prompt_logprobs(), 2);
  EXPECT_EQ(parsed.options.prompt_logprobs, 2);
  EXPECT_FALSE(
      Parse(R"({"prompt": "x", "prompt_logprobs": null})").prompts[0].has_prompt_logprobs());
  EXPECT_FALSE(Parse(R"({"prompt": "x", "logprobs": 2})").prompts[0].has_prompt_logprobs());
  EXPECT_FALSE(Parse(R"({"prompt": "x", "echo": true})").prompts[0].has_prompt_logprobs());
}

TEST(CompletionRequestTest, EchoWithLogprobsAsksForThePromptsLogprobs) {
  // The scoring request of evaluation harnesses.
  const CompletionRequest parsed =
      Parse(R"({"prompt": ["a b", "c"], "echo": true, "logprobs": 1, "max_tokens": 0})");
  for (const v1::GenerateRequest& r : parsed.prompts) {
    EXPECT_EQ(r.prompt_logprobs(), 1);
    EXPECT_EQ(r.stopping().max_tokens(), 0u);
  }
  // vLLM's own field only widens it; the option tells the renderer it was asked for.
  const CompletionRequest both =
      Parse(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 4})");
  EXPECT_EQ(both.prompts[0].prompt_logprobs(), 4);
  EXPECT_EQ(both.options.prompt_logprobs, 4);
  EXPECT_FALSE(
      Parse(R"({"prompt": "x", "echo": true, "logprobs": 1})").options.prompt_logprobs.has_value());
}

TEST(CompletionRequestTest, TopKMinusOneMeansOffAndTruncateMinusOneMeansLeft) {
  const CompletionRequest parsed =
      Parse(R"({"prompt": "x", "top_k": -1, "truncate_prompt_tokens": -1})");
  EXPECT_FALSE(parsed.prompts[0].sampling().has_top_k());
  EXPECT_EQ(parsed.prompts[0].truncate(), v1::TRUNCATION_LEFT);
  EXPECT_EQ(parsed.options.truncate_prompt_tokens, -1);
}

TEST(CompletionRequestTest, NullMeansUnsetAndUnknownFieldsAreIgnored) {
  const CompletionRequest parsed = Parse(
      R"({"prompt": "x", "temperature": null, "stop": null, "suffix": null, "best_of": 1,
          "frobnicate": "ignored"})");
  EXPECT_FALSE(parsed.prompts[0].sampling().has_temperature());
  EXPECT_TRUE(parsed.prompts[0].stopping().stop().empty());
}

TEST(CompletionRequestTest, IntegralFloatIsAnInteger) {
  EXPECT_EQ(Parse(R"({"prompt": "x", "max_tokens": 5.0})").prompts[0].stopping().max_tokens(), 5u);
  EXPECT_EQ(Parse(R"({"prompt": "x", "priority": 2147483647.0})").prompts[0].priority(),
            2147483647);
  EXPECT_EQ(Parse(R"({"prompt": "x", "seed": -4.0})").prompts[0].sampling().seed(),
            static_cast<uint64_t>(-4));
  EXPECT_EQ(ParseError(R"({"prompt": "x", "seed": 1e300})").param, "seed");
  EXPECT_EQ(ParseError(R"({"prompt": "x", "seed": 18446744073709551615})").param, "seed");
}

TEST(CompletionRequestTest, RangesAreLeftToTheValidator) {
  const CompletionRequest parsed =
      Parse(R"({"prompt": "x", "temperature": 250, "n": 100, "max_tokens": 0, "logprobs": 99})");
  EXPECT_FLOAT_EQ(parsed.prompts[0].sampling().temperature(), 250.0f);
  EXPECT_EQ(parsed.prompts[0].sampling().n(), 100);
  EXPECT_EQ(parsed.prompts[0].stopping().max_tokens(), 0u);
  EXPECT_EQ(parsed.prompts[0].logprobs(), 99);
}

TEST(CompletionRequestTest, BodyErrors) {
  for (const char* body : {"", "not json", "[1, 2]", "\"x\"", "{\"prompt\": "}) {
    const OpenAiError error = ParseError(body);
    EXPECT_EQ(error.http_status, 400);
    EXPECT_EQ(error.type, "invalid_request_error");
    EXPECT_EQ(error.param, "");
  }
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_THAT(ParseError(R"({"prompt": )" + deep + "}").message, HasSubstr("nested deeper"));
}

TEST(CompletionRequestTest, PromptShapeErrors) {
  for (const char* body :
       {R"({})", R"({"prompt": 5})", R"({"prompt": []})", R"({"prompt": ["a", 1]})",
        R"({"prompt": [1, "a"]})", R"({"prompt": [[1], "a"]})", R"({"prompt": [[1, "a"]]})",
        R"({"prompt": [1.5]})", R"({"prompt": [4294967296]})", R"({"prompt": [{}]})"}) {
    const OpenAiError error = ParseError(body);
    EXPECT_EQ(error.http_status, 400) << body;
    EXPECT_EQ(error.param, "prompt") << body;
  }
}

TEST(CompletionRequestTest, FieldTypeErrors) {
  const struct {
    const char* field;
    const char* value;
    const char* message;
  } cases[] = {
      {"model", "1", "model must be a string"},
      {"user", "true", "user must be a string"},
      {"temperature", "\"hot\"", "temperature must be a number"},
      {"top_p", "[]", "top_p must be a number"},
      {"min_p", "true", "min_p must be a number"},
      {"presence_penalty", "{}", "presence_penalty must be a number"},
      {"frequency_penalty", "\"0\"", "frequency_penalty must be a number"},
      {"repetition_penalty", "\"1\"", "repetition_penalty must be a number"},
      {"top_k", "1.5", "top_k must be an integer in"},
      {"seed", "\"1\"", "seed must be an integer"},
      {"n", "2.5", "n must be an integer in"},
      {"max_tokens", "-1", "max_tokens must be an integer in [0, 4294967295]"},
      {"min_tokens", "\"2\"", "min_tokens must be an integer"},
      {"stop", "1", "stop must be a string or an array of strings"},
      {"stop", "[\"a\", 1]", "stop must be a string or an array of strings"},
      {"stop_token_ids", "1", "stop_token_ids must be an array of token ids"},
      {"stop_token_ids", "[\"a\"]", "stop_token_ids must be an integer"},
      {"ignore_eos", "1", "ignore_eos must be a boolean"},
      {"include_stop_str_in_output", "\"yes\"", "include_stop_str_in_output must be a boolean"},
      {"skip_special_tokens", "0", "skip_special_tokens must be a boolean"},
      {"add_special_tokens", "0", "add_special_tokens must be a boolean"},
      {"priority", "99999999999", "priority must be an integer in"},
      {"cache_salt", "1", "cache_salt must be a string"},
      {"truncate_prompt_tokens", "-2", "truncate_prompt_tokens must be an integer in"},
      {"logit_bias", "[1]", "logit_bias must be an object"},
      {"logit_bias", "{\"a\": 1}", "logit_bias keys must be token ids"},
      {"logit_bias", "{\"1\": \"x\"}", "logit_bias must be a number"},
      {"logprobs", "true", "logprobs must be an integer"},
      {"echo", "1", "echo must be a boolean"},
      {"stream", "\"true\"", "stream must be a boolean"},
      {"stream_options", "true", "stream_options must be an object"},
  };
  for (const auto& c : cases) {
    const std::string body =
        std::string(R"({"prompt": "x", "stream": true, ")") + c.field + "\": " + c.value + "}";
    const OpenAiError error = ParseError(body);
    EXPECT_EQ(error.http_status, 400) << body;
    EXPECT_EQ(error.param, c.field) << body;
    EXPECT_THAT(error.message, HasSubstr(c.message)) << body;
  }
}

// Fields of OpenAI's completions Loom does not implement are refused, not
// ignored: a suffix asks for an insertion, best_of above n for a ranking.
TEST(CompletionRequestTest, SuffixAndBestOfBeyondNAreRefused) {
  const OpenAiError suffix = ParseError(R"({"prompt": "x", "suffix": "end"})");
  EXPECT_EQ(suffix.http_status, 400);
  EXPECT_EQ(suffix.param, "suffix");
  EXPECT_THAT(suffix.message, HasSubstr("not supported"));
  EXPECT_EQ(ParseError(R"({"prompt": "x", "suffix": 3})").param, "suffix");
  const OpenAiError best_of = ParseError(R"({"prompt": "x", "best_of": 3, "n": 2})");
  EXPECT_EQ(best_of.param, "best_of");
  EXPECT_THAT(best_of.message, HasSubstr("got 3"));
  EXPECT_EQ(ParseError(R"({"prompt": "x", "best_of": 2})").param, "best_of");
  // The defaults, an empty suffix and best_of equal to n (or 1) are accepted.
  for (const std::string body :
       {R"({"prompt": "x", "suffix": null, "best_of": null})", R"({"prompt": "x", "suffix": ""})",
        R"({"prompt": "x", "best_of": 1, "n": 3})", R"({"prompt": "x", "best_of": 3, "n": 3})"}) {
    EXPECT_TRUE(ParseCompletionRequest(body).ok()) << body;
  }
}

TEST(CompletionRequestTest, StreamOptionsNeedStream) {
  const OpenAiError error =
      ParseError(R"({"prompt": "x", "stream_options": {"include_usage": true}})");
  EXPECT_EQ(error.param, "stream_options");
  const OpenAiError include_usage =
      ParseError(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})");
  EXPECT_EQ(include_usage.param, "stream_options.include_usage");
}

}  // namespace
}  // namespace loom::openai
