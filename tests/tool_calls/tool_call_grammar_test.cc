// The tool-call grammars compiled by the real constraint compiler over a
// byte-per-token vocabulary: a call the format's parser reads back is
// accepted byte by byte; a wrong name, arguments outside the schema or a
// second call where one is asked for are refused at the offending byte.
#include "tool_calls/tool_call_grammar.h"

#include <memory>
#include <string>
#include <vector>

#include "constraint/constraint_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tool_calls/tool_call_parser.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kEos = 256;

const std::vector<ToolFunction> kFunctions = {
    {"get_weather",
     R"({"type": "object", "properties": {"city": {"type": "string"},
         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
         "required": ["city", "unit"], "additionalProperties": false})",
     0},
    {"now", "", 1},
};

std::unique_ptr<ConstraintCompiler> ByteCompiler() {
  ConstraintVocabulary vocabulary;
  for (int b = 0; b < 256; ++b)
    vocabulary.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  vocabulary.eos_token_ids = {kEos};
  vocabulary.vocab_size = 257;
  absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler =
      ConstraintCompiler::Create(std::move(vocabulary));
  EXPECT_TRUE(compiler.ok()) << compiler.status();
  return compiler.ok() ? *std::move(compiler) : nullptr;
}

// How many bytes of text the grammar accepts, and whether it may end there.
struct Walk {
  size_t accepted = 0;
  bool accepting = false;
};

Walk WalkText(const TokenConstraint& constraint, const std::string& text) {
  std::unique_ptr<ConstraintMatcher> matcher = constraint.NewMatcher();
  Walk walk;
  for (unsigned char c : text) {
    if (!matcher->AcceptToken(c)) return walk;
    ++walk.accepted;
  }
  walk.accepting = matcher->IsAccepting();
  return walk;
}

std::shared_ptr<const TokenConstraint> Compile(ConstraintCompiler& compiler, ToolCallFormat format,
                                               std::span<const ToolFunction> functions,
                                               bool single_call) {
  absl::StatusOr<std::string> grammar = ToolCallGrammar(format, functions, single_call);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  if (!grammar.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> compiled =
      compiler.Compile({ConstraintKind::kGrammar, *grammar, {}});
  EXPECT_TRUE(compiled.ok()) << compiled.status() << "\n" << *grammar;
  return compiled.ok() ? *compiled : nullptr;
}

TEST(ToolCallGrammarTest, HermesCallsAreAcceptedAndParseBack) {
  std::unique_ptr<ConstraintCompiler> compiler = ByteCompiler();
  ASSERT_NE(compiler, nullptr);
  std::shared_ptr<const TokenConstraint> any =
      Compile(*compiler, ToolCallFormat::kHermes, kFunctions, /*single_call=*/false);
  ASSERT_NE(any, nullptr);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"celsius\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  const std::string two = weather + "\n" + now;
  for (const std::string& text : {weather, now, two}) {
    const Walk walk = WalkText(*any, text);
    EXPECT_EQ(walk.accepted, text.size()) << text;
    EXPECT_TRUE(walk.accepting) << text;
    const ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kHermes, text);
    EXPECT_EQ(parsed.content, "");
    EXPECT_FALSE(parsed.calls.empty());
  }
  const ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kHermes, two);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city": "Paris", "unit": "celsius"})");
  EXPECT_EQ(parsed.calls[1].name, "now");

  const std::string wrong_name = "<tool_call>\n{\"name\": \"get_time\"";
  EXPECT_EQ(WalkText(*any, wrong_name).accepted, wrong_name.find("time"));
  const std::string bad_enum =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"kelvin\"";
  EXPECT_EQ(WalkText(*any, bad_enum).accepted, bad_enum.find("kelvin"));
  EXPECT_FALSE(WalkText(*any, weather.substr(0, weather.size() - 1)).accepting);
}

TEST(ToolCallGrammarTest, ANamedFunctionIsCalledOnce) {
  std::unique_ptr<ConstraintCompiler> compiler = ByteCompiler();
  ASSERT_NE(compiler, nullptr);
  const ToolFunction only[] = {kFunctions[0]};
  std::shared_ptr<const TokenConstraint> named =
      Compile(*compiler, ToolCallFormat::kHermes, only, /*single_call=*/true);
  ASSERT_NE(named, nullptr);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": "
      "\"fahrenheit\"}}\n</tool_call>";
  EXPECT_TRUE(WalkText(*named, call).accepting);
  EXPECT_EQ(WalkText(*named, call + "\n").accepted, call.size());
  const std::string other = "<tool_call>\n{\"name\": \"now\"";
  EXPECT_EQ(WalkText(*named, other).accepted, other.find("now"));
}

TEST(ToolCallGrammarTest, Llama3JsonCalls) {
  std::unique_ptr<ConstraintCompiler> compiler = ByteCompiler();
  ASSERT_NE(compiler, nullptr);
  std::shared_ptr<const TokenConstraint> any =
      Compile(*compiler, ToolCallFormat::kLlama3Json, kFunctions, /*single_call=*/false);
  ASSERT_NE(any, nullptr);
  const std::string text =
      "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": "
      "{\"city\": \"Oslo\", \"unit\": \"celsius\"}}";
  const Walk walk = WalkText(*any, text);
  EXPECT_EQ(walk.accepted, text.size());
  EXPECT_TRUE(walk.accepting);
  const ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kLlama3Json, text);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[1].arguments, R"({"city": "Oslo", "unit": "celsius"})");
}

TEST(ToolCallGrammarTest, AnUnsupportedSchemaNamesItsTool) {
  const ToolFunction bad[] = {
      {"f", R"({"type": "object", "properties": {"a": {"type": "strin"}}})", 3}};
  absl::StatusOr<std::string> grammar = ToolCallGrammar(ToolCallFormat::kHermes, bad, true);
  ASSERT_FALSE(grammar.ok());
  EXPECT_EQ(grammar.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(grammar.status().message(), HasSubstr("tools[3].parameters: at /properties/a"));
}

}  // namespace
}  // namespace loom
