// response_format, vLLM's structured_outputs, tools and tool_choice, and the
// messages of a tool-calling conversation, parsed into the GenerateRequest;
// the errors name OpenAI's parameters.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "openai/chat_request.h"
#include "openai/completion_request.h"
#include "openai/openai_error.h"
#include "openai/ordered_json.h"
#include "openai/structured_output.h"

namespace loom::openai {
namespace {

using ::testing::HasSubstr;

constexpr char kMessages[] = R"("messages": [{"role": "user", "content": "hi"}])";

ChatRequest Parse(const std::string& fields) {
  absl::StatusOr<ChatRequest> parsed =
      ParseChatRequest(std::string("{") + kMessages + ", " + fields + "}");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : ChatRequest{};
}

OpenAiError ParseError(const std::string& fields) {
  absl::StatusOr<ChatRequest> parsed =
      ParseChatRequest(std::string("{") + kMessages + ", " + fields + "}");
  EXPECT_FALSE(parsed.ok()) << fields;
  return ToOpenAiError(parsed.status(), Endpoint::kChatCompletions);
}

TEST(ResponseFormatTest, TextJsonObjectAndJsonSchema) {
  EXPECT_EQ(Parse(R"("response_format": {"type": "text"})").request.constraint_case(),
            v1::GenerateRequest::CONSTRAINT_NOT_SET);
  const ChatRequest object = Parse(R"("response_format": {"type": "json_object"})");
  EXPECT_TRUE(object.request.json_object());
  EXPECT_EQ(object.options.constraint_field, "response_format");
  // The schema keeps the client's key order (properties in the order written).
  const ChatRequest schema = Parse(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "person", "strict": true, "schema": {"type": "object",
       "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}})");
  EXPECT_EQ(
      schema.request.json_schema(),
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  EXPECT_EQ(schema.options.constraint_field, "response_format.json_schema.schema");
  // No schema: any JSON object.
  EXPECT_TRUE(Parse(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})")
                  .request.json_object());
}

TEST(ResponseFormatTest, Errors) {
  OpenAiError e = ParseError(R"("response_format": {"type": "yaml"})");
  EXPECT_EQ(e.param, "response_format");
  EXPECT_EQ(e.message,
            "response_format.type must be one of text, json_object, json_schema; got \"yaml\"");
  EXPECT_EQ(ParseError(R"("response_format": "json")").param, "response_format");
  e = ParseError(R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})");
  EXPECT_EQ(e.message, "response_format.json_schema.name must be a string");
  e = ParseError(
      R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}})");
  EXPECT_EQ(e.message, "response_format.json_schema.schema must be an object");
}

TEST(StructuredOutputsTest, EachKind) {
  const ChatRequest json = Parse(R"("structured_outputs": {"json": {"type": "array"}})");
  EXPECT_EQ(json.request.json_schema(), R"({"type":"array"})");
  EXPECT_EQ(json.options.constraint_field, "structured_outputs.json");
  EXPECT_EQ(
      Parse(R"("structured_outputs": {"json": "{\"type\": \"null\"}"})").request.json_schema(),
      R"({"type": "null"})");
  EXPECT_EQ(Parse(R"("structured_outputs": {"regex": "[0-9]+"})").request.regex(), "[0-9]+");
  EXPECT_EQ(Parse(R"("structured_outputs": {"grammar": "root ::= \"a\""})").request.grammar(),
            "root ::= \"a\"");
  const ChatRequest choice = Parse(R"("structured_outputs": {"choice": ["yes", "no"]})");
  EXPECT_THAT(choice.request.choice().choices(), ::testing::ElementsAre("yes", "no"));
  EXPECT_TRUE(
      Parse(R"("structured_outputs": {"json_object": true, "json": null})").request.json_object());
}

TEST(StructuredOutputsTest, Errors) {
  OpenAiError e = ParseError(R"("structured_outputs": {"regex": "a", "choice": ["a"]})");
  EXPECT_EQ(e.param, "structured_outputs");
  EXPECT_EQ(e.message,
            "structured_outputs must set exactly one of json, regex, choice, grammar, "
            "json_object; got 2");
  EXPECT_THAT(ParseError(R"("structured_outputs": {"json_object": false})").message,
              HasSubstr("got 0"));
  EXPECT_EQ(ParseError(R"("structured_outputs": {"choice": ["a", 1]})").message,
            "structured_outputs.choice must be an array of strings");
  e = ParseError(R"("response_format": {"type": "json_object"},
                    "structured_outputs": {"regex": "a"})");
  EXPECT_EQ(e.message, "structured_outputs and response_format cannot both constrain the output");
}

TEST(StructuredOutputsTest, CompletionsAcceptThemToo) {
  absl::StatusOr<CompletionRequest> parsed =
      ParseCompletionRequest(R"({"prompt": ["a", "b"], "structured_outputs": {"regex": "x+"}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->prompts.size(), 2u);
  EXPECT_EQ(parsed->prompts[1].regex(), "x+");
}

TEST(StructuredOutputsTest, ConstraintErrorsAreRenamedToTheFieldUsed) {
  OpenAiOptions options;
  options.constraint_field = "response_format.json_schema.schema";
  OpenAiError e = ToOpenAiError(
      RenameConstraintError(absl::InvalidArgumentError(
                                "json_schema: at /properties/age: unsupported keyword \"not\""),
                            options),
      Endpoint::kChatCompletions);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_EQ(e.message,
            "response_format.json_schema.schema: at /properties/age: unsupported keyword \"not\"");
  options.constraint_field = "structured_outputs.regex";
  e = ToOpenAiError(RenameConstraintError(
                        absl::InvalidArgumentError("regex: at offset 7: unbalanced ')'"), options),
                    Endpoint::kCompletions);
  EXPECT_EQ(e.param, "structured_outputs");
  EXPECT_EQ(e.message, "structured_outputs.regex: at offset 7: unbalanced ')'");
  // Other errors pass unchanged.
  const absl::Status other = absl::InvalidArgumentError("sampling.top_p must be in (0, 1]");
  EXPECT_EQ(RenameConstraintError(other, options), other);
  EXPECT_EQ(
      RenameConstraintError(absl::InvalidArgumentError("regex: x"), OpenAiOptions{}).message(),
      "regex: x");
}

TEST(ToolsTest, ToolsToolChoiceAndCallsInTheConversation) {
  const ChatRequest parsed = Parse(R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
       "parameters": {"type": "object", "properties": {"b": {}, "a": {}}}, "strict": true}},
      {"type": "function", "function": {"name": "now"}}],
    "tool_choice": {"type": "function", "function": {"name": "now"}})");
  const v1::ChatMessages& m = parsed.request.messages();
  ASSERT_EQ(m.tools_size(), 2);
  EXPECT_EQ(m.tools(0).name(), "get_weather");
  EXPECT_EQ(m.tools(0).description(), "Weather.");
  EXPECT_EQ(m.tools(0).parameters(), R"({"type":"object","properties":{"b":{},"a":{}}})");
  EXPECT_EQ(m.tools(1).parameters(), "");
  EXPECT_EQ(m.tool_choice(), v1::TOOL_CHOICE_FUNCTION);
  EXPECT_EQ(m.tool_choice_function(), "now");
  EXPECT_EQ(Parse(R"("tool_choice": "none")").request.messages().tool_choice(),
            v1::TOOL_CHOICE_NONE);
  EXPECT_EQ(Parse(R"("tool_choice": "auto")").request.messages().tool_choice(),
            v1::TOOL_CHOICE_AUTO);
  EXPECT_EQ(Parse(R"("tool_choice": "required")").request.messages().tool_choice(),
            v1::TOOL_CHOICE_REQUIRED);

  absl::StatusOr<ChatRequest> chat = ParseChatRequest(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"}]})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  const v1::ChatMessage& call = chat->request.messages().messages(1);
  ASSERT_EQ(call.tool_calls_size(), 1);
  EXPECT_EQ(call.tool_calls(0).id(), "call_1");
  EXPECT_EQ(call.tool_calls(0).name(), "get_weather");
  EXPECT_EQ(call.tool_calls(0).arguments(), R"({"city": "Paris"})");
  const v1::ChatMessage& result = chat->request.messages().messages(2);
  EXPECT_EQ(result.tool_call_id(), "call_1");
  EXPECT_EQ(result.name(), "get_weather");
  EXPECT_EQ(result.content(), "sunny");
}

TEST(ToolsTest, Errors) {
  OpenAiError e = ParseError(R"("tool_choice": "always")");
  EXPECT_EQ(e.param, "tool_choice");
  EXPECT_THAT(e.message, HasSubstr("got \"always\""));
  EXPECT_EQ(ParseError(R"("tool_choice": {"type": "function"})").param, "tool_choice");
  e = ParseError(R"("tools": [{"type": "retrieval"}])");
  EXPECT_EQ(e.param, "tools");
  EXPECT_EQ(e.message, "tools[0].type must be \"function\"");
  e = ParseError(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])");
  EXPECT_EQ(e.message, "tools[0].function.parameters must be an object");
  EXPECT_EQ(ParseError(R"("tools": {"type": "function"})").message,
            "tools must be an array of tools");
  absl::StatusOr<ChatRequest> bad_call = ParseChatRequest(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
          "arguments": 7}}]}]})");
  ASSERT_FALSE(bad_call.ok());
  EXPECT_EQ(bad_call.status().message(),
            "messages[0].tool_calls[0].function.arguments must be a string of a JSON object");
}

TEST(OrderedJsonTest, KeepsOrderAndTheLastOfRepeatedKeys) {
  const Json json = ParseOrderedJson(R"({"b": 1, "a": {"y": [1, {"q": 2, "p": 3}]}, "b": 4})");
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.dump(), R"({"b":4,"a":{"y":[1,{"q":2,"p":3}]}})");
  EXPECT_TRUE(ParseOrderedJson("[1, 2").is_discarded());
  EXPECT_TRUE(ParseOrderedJson("{} x").is_discarded());
  EXPECT_EQ(ParseOrderedJson("\"s\"").get<std::string>(), "s");
}

}  // namespace
}  // namespace loom::openai
