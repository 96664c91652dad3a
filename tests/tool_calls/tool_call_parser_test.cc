// The tool-call parsers: what a whole reply parses to, and that streaming the
// same reply in any split (every byte boundary, byte by byte) adds up to it,
// with each call's name on its first delta and arguments growing after.
#include "tool_calls/tool_call_parser.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fixtures/fixture_util.h"
#include "tool_calls/tool_call_format.h"

namespace loom {
namespace {

struct Case {
  std::string text;
  std::string content;
  std::vector<ToolCall> calls;
};

void ExpectParsed(const ParsedToolCalls& parsed, const Case& c, const std::string& how) {
  EXPECT_EQ(parsed.content, c.content) << how;
  ASSERT_EQ(parsed.calls.size(), c.calls.size()) << how;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(parsed.calls[i].name, c.calls[i].name) << how << " call " << i;
    EXPECT_EQ(parsed.calls[i].arguments, c.calls[i].arguments) << how << " call " << i;
  }
}

// Feeds the pieces, checks the delta shapes, and folds the updates.
ParsedToolCalls Stream(ToolCallFormat format, const std::vector<std::string_view>& pieces,
                       int* argument_fragments = nullptr) {
  std::unique_ptr<ToolCallParser> parser = MakeToolCallParser(format);
  ParsedToolCalls parsed;
  std::vector<bool> named;
  auto apply = [&](const ToolCallUpdate& update) {
    for (const ToolCallDelta& delta : update.calls) {
      const auto index = static_cast<size_t>(delta.index);
      EXPECT_LE(index, named.size()) << "calls start in order";
      if (index == named.size()) {
        EXPECT_FALSE(delta.name.empty()) << "a call's first delta names the function";
        named.push_back(true);
      } else {
        EXPECT_TRUE(delta.name.empty()) << "only the first delta has the name";
      }
      if (argument_fragments != nullptr && !delta.arguments.empty()) ++*argument_fragments;
    }
    ApplyToolCallUpdate(update, parsed);
  };
  for (std::string_view piece : pieces) apply(parser->Feed(piece));
  apply(parser->Finish());
  EXPECT_EQ(parser->num_calls(), static_cast<int>(parsed.calls.size()));
  return parsed;
}

void ExpectEverySplit(ToolCallFormat format, const Case& c) {
  SCOPED_TRACE(c.text);
  ExpectParsed(ParseToolCalls(format, c.text), c, "whole");
  const std::string_view text = c.text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ExpectParsed(Stream(format, {text.substr(0, cut), text.substr(cut)}), c,
                 "split at " + std::to_string(cut));
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  ExpectParsed(Stream(format, bytes), c, "byte by byte");
}

const char kWeatherArgs[] = R"({"city": "Zürich", "unit": "celsius"})";

TEST(HermesParserTest, CasesWholeAndStreamed) {
  const std::string call = std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ") +
                           kWeatherArgs + "}\n</tool_call>";
  const std::vector<Case> cases = {
      {"Paris is the capital of France.", "Paris is the capital of France.", {}},
      {call, "", {{"get_weather", kWeatherArgs}}},
      {"Let me check.\n" + call + "\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n" +
           "</tool_call>\n",
       "Let me check.\n",
       {{"get_weather", kWeatherArgs}, {"now", "{}"}}},
      {"<tool_call>{\"name\": \"now\"}</tool_call>", "", {{"now", "{}"}}},
      {"<tool_call>not json</tool_call> after", "<tool_call>not json</tool_call> after", {}},
      {"<tool_call>{\"name\": 3}</tool_call>", "<tool_call>{\"name\": 3}</tool_call>", {}},
      {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1", "", {{"f", "{\"x\": 1"}}},
      // Cut off (max_tokens) before its arguments: none, not a made-up "{}".
      {"<tool_call>\n{\"name\": \"get_weather\", \"argu", "", {{"get_weather", ""}}},
      {"a <tool_c", "a <tool_c", {}},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"<tool_call>}\"}}</tool_call>",
       "",
       {{"f", R"({"s": "<tool_call>}"})"}}},
      {"<tool_call>{\"arguments\": [1], \"name\": \"f\"}</tool_call> Done.",
       " Done.",
       {{"f", "[1]"}}},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>", "", {{"f", "{}"}}},
  };
  for (const Case& c : cases) ExpectEverySplit(ToolCallFormat::kHermes, c);
}

TEST(HermesParserTest, ArgumentsStreamAsTheyGrow) {
  const std::string text = std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ") +
                           kWeatherArgs + "}\n</tool_call>";
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
  int fragments = 0;
  Stream(ToolCallFormat::kHermes, bytes, &fragments);
  EXPECT_EQ(fragments, static_cast<int>(std::string_view(kWeatherArgs).size()));
}

TEST(Llama3JsonParserTest, CasesWholeAndStreamed) {
  const std::vector<Case> cases = {
      {"Paris is the capital.", "Paris is the capital.", {}},
      {"{\"name\": \"get_weather\", \"parameters\": " + std::string(kWeatherArgs) + "}",
       "",
       {{"get_weather", kWeatherArgs}}},
      {"<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": "
       "{\"x\": [1, 2]}}",
       "",
       {{"a", "{}"}, {"b", R"({"x": [1, 2]})"}}},
      {"  {\"answer\": 42}", "{\"answer\": 42}", {}},
      {"{\"name\": \"f\", \"parameters\": {\"x\": 1}} trailing words",
       "trailing words",
       {{"f", R"({"x": 1})"}}},
      {"<|python_ta", "<|python_ta", {}},
      {"{\"name\": \"f\", \"arguments\": {}}", "", {{"f", "{}"}}},
      {"{\"name\": \"f\", \"param", "", {{"f", ""}}},
      {"{\"name\": \"f\", \"parameters\": {\"x\": 1}, ]} rest", "} rest", {{"f", R"({"x": 1})"}}},
  };
  for (const Case& c : cases) ExpectEverySplit(ToolCallFormat::kLlama3Json, c);
}

TEST(ToolCallFormatTest, NamesAndDetection) {
  EXPECT_EQ(*ToolCallFormatFromName("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ToolCallFormatFromName("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(ToolCallFormatFromName("mistral").status().message(),
            "tool_call_parser must be one of hermes, llama3_json; got \"mistral\"");
  EXPECT_EQ(ToolCallFormatName(ToolCallFormat::kLlama3Json), "llama3_json");
  using ::loom::testing::ReadFixtureJson;
  using ::loom::testing::ReadFixtureText;
  EXPECT_EQ(DetectToolCallFormat(ReadFixtureText("chat_templates/hermes_tools.jinja")),
            ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat(
                ReadFixtureJson("tiny/llama32_tied/chat.json")["template"].get<std::string>()),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(
      DetectToolCallFormat(ReadFixtureJson("smollm2/chat.json")["template"].get<std::string>()),
      ToolCallFormat::kNone);
  EXPECT_EQ(
      DetectToolCallFormat(ReadFixtureJson("tiny/qwen2/chat.json")["template"].get<std::string>()),
      ToolCallFormat::kNone);
}

}  // namespace
}  // namespace loom
