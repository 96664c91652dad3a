// The server side of structured outputs and tools: the validator's checks of
// the constraint oneof, the tools, tool calls and tool_choice; the spec a
// request compiles to (its own constraint, or the tool-call grammar its
// tool_choice forces); and the flags.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "constraint/constraint_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.pb.h"
#include "server/request_builder.h"
#include "server/request_constraint.h"
#include "server/request_validator.h"
#include "server/server_config.h"
#include "tests/server/fake_model_frontend.h"

namespace loom {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int32_t kVocab = 300;

void ExpectInvalid(const v1::GenerateRequest& request, const std::string& message,
                   const RequestLimits& limits = {}) {
  const absl::Status status = ValidateGenerateRequest(request, kVocab, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

v1::GenerateRequest Chat() {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("Weather in Paris?");
  return r;
}

v1::Tool* AddTool(v1::GenerateRequest& r, const std::string& name,
                  const std::string& parameters = "") {
  v1::Tool* tool = r.mutable_messages()->add_tools();
  tool->set_name(name);
  tool->set_parameters(parameters);
  return tool;
}

TEST(ConstraintValidationTest, EachKindAndItsLimits) {
  RequestLimits limits;
  limits.max_constraint_bytes = 8;
  v1::GenerateRequest r;
  r.set_prompt("x");
  r.set_regex("[a-z]+");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());
  r.set_regex("");
  ExpectInvalid(r, "regex must not be empty", limits);
  r.set_json_schema("{\"type\": 1}");
  ExpectInvalid(r, "json_schema must have at most 8 bytes; got 11 bytes", limits);
  r.set_grammar("");
  ExpectInvalid(r, "grammar must not be empty", limits);
  r.set_json_object(false);
  ExpectInvalid(r, "json_object must be true when set", limits);
  r.set_json_object(true);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());
  r.mutable_choice();
  ExpectInvalid(r, "choice.choices must be 1..1024 strings; got 0", limits);
  r.mutable_choice()->add_choices("yes");
  r.mutable_choice()->add_choices("");
  ExpectInvalid(r, "choice.choices[1] must not be empty", limits);
  r.mutable_choice()->set_choices(1, "maybe-so");
  ExpectInvalid(r, "choice.choices (together) must have at most 8 bytes; got 11 bytes", limits);
  r.mutable_choice()->set_choices(1, "no");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());
}

TEST(ToolValidationTest, ToolsAndToolChoice) {
  v1::GenerateRequest r = Chat();
  AddTool(r, "get_weather", R"({"type": "object"})");
  AddTool(r, "now-2");
  r.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_FUNCTION);
  r.mutable_messages()->set_tool_choice_function("now-2");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());

  r.mutable_messages()->set_tool_choice_function("later");
  ExpectInvalid(r, "messages.tool_choice_function must name one of messages.tools; got \"later\"");
  r.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
  ExpectInvalid(r,
                "messages.tool_choice_function must be set exactly when messages.tool_choice is "
                "TOOL_CHOICE_FUNCTION");
  r.mutable_messages()->clear_tool_choice_function();
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());

  r.mutable_messages()->mutable_tools(1)->set_name("get weather");
  ExpectInvalid(r, "messages.tools[1].name must match [A-Za-z0-9_-]{1,64}; got \"get weather\"");
  r.mutable_messages()->mutable_tools(1)->set_name("get_weather");
  ExpectInvalid(r, "messages.tools[1].name must be unique; \"get_weather\" is listed twice");
  r.mutable_messages()->mutable_tools(1)->set_name(std::string(65, 'a'));
  EXPECT_THAT(ValidateGenerateRequest(r, kVocab).message(), HasSubstr("must match"));
  r.mutable_messages()->mutable_tools(1)->set_name("now");
  r.mutable_messages()->mutable_tools(1)->set_parameters("[1]");
  ExpectInvalid(r, "messages.tools[1].parameters must be a JSON object");
  r.mutable_messages()->mutable_tools()->RemoveLast();
  r.mutable_messages()->mutable_tools()->RemoveLast();
  ExpectInvalid(r, "messages.tool_choice TOOL_CHOICE_REQUIRED needs messages.tools; got none");
  r.mutable_messages()->set_tool_choice(v1::ToolChoice(9));
  EXPECT_THAT(ValidateGenerateRequest(r, kVocab).message(),
              HasSubstr("messages.tool_choice must be one of"));
}

TEST(ToolValidationTest, LimitsOnToolsAndTheirSchemas) {
  RequestLimits limits;
  limits.max_constraint_bytes = 16;
  limits.max_prompt_bytes = 64;
  v1::GenerateRequest r = Chat();
  AddTool(r, "f", R"({"type": "object"})");
  ExpectInvalid(r, "messages.tools[0].parameters must have at most 16 bytes; got 18 bytes", limits);
  r.mutable_messages()->mutable_tools(0)->set_parameters("{}");
  r.mutable_messages()->mutable_tools(0)->set_description(std::string(41, 'd'));
  ExpectInvalid(r, "messages (turns and tools together) must have at most 64 bytes; got 65 bytes",
                limits);
  v1::GenerateRequest many = Chat();
  for (int i = 0; i <= kMaxTools; ++i) AddTool(many, absl::StrCat("f", i));
  ExpectInvalid(many, "messages.tools must have at most 128 tools; got 129");
}

TEST(ToolValidationTest, TurnsOfAToolConversation) {
  v1::GenerateRequest r = Chat();
  v1::ChatMessage* assistant = r.mutable_messages()->add_messages();
  assistant->set_role("assistant");
  v1::ToolCall* call = assistant->add_tool_calls();
  call->set_id("call_1");
  call->set_name("get_weather");
  call->set_arguments(R"({"city": "Paris"})");
  v1::ChatMessage* result = r.mutable_messages()->add_messages();
  result->set_role("tool");
  result->set_tool_call_id("call_1");
  result->set_content("sunny");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  call->set_arguments("\"Paris\"");
  ExpectInvalid(r, "messages.messages[1].tool_calls[0].arguments must be a JSON object");
  call->set_arguments("{}");
  call->clear_name();
  ExpectInvalid(r, "messages.messages[1].tool_calls[0].name must not be empty");
  call->set_name("f");
  *result->add_tool_calls() = *call;
  ExpectInvalid(r,
                "messages.messages[2].tool_calls are allowed on assistant turns only; got role "
                "\"tool\"");
}

TEST(ConstraintSpecTest, TheOneofAsASpec) {
  v1::GenerateRequest r;
  r.set_prompt("x");
  EXPECT_FALSE(ConstraintSpecOf(r, ToolCallFormat::kHermes)->has_value());
  r.set_json_schema(R"({"type": "string"})");
  std::optional<ConstraintSpec> spec = *ConstraintSpecOf(r, ToolCallFormat::kNone);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(spec->text, R"({"type": "string"})");
  r.mutable_choice()->add_choices("a");
  r.mutable_choice()->add_choices("b");
  spec = *ConstraintSpecOf(r, ToolCallFormat::kNone);
  EXPECT_EQ(spec->kind, ConstraintKind::kChoice);
  EXPECT_THAT(spec->choices, ::testing::ElementsAre("a", "b"));
  r.set_json_object(true);
  EXPECT_EQ((*ConstraintSpecOf(r, ToolCallFormat::kNone))->kind, ConstraintKind::kJsonObject);
  r.set_regex("a+");
  EXPECT_EQ((*ConstraintSpecOf(r, ToolCallFormat::kNone))->kind, ConstraintKind::kRegex);
  r.set_grammar("root ::= \"a\"");
  EXPECT_EQ((*ConstraintSpecOf(r, ToolCallFormat::kNone))->text, "root ::= \"a\"");
}

TEST(ConstraintSpecTest, AutoAndNoneLeaveToolRequestsUnconstrained) {
  v1::GenerateRequest r = Chat();
  AddTool(r, "f");
  r.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_AUTO);
  EXPECT_FALSE(ConstraintSpecOf(r, ToolCallFormat::kHermes)->has_value());
  r.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_NONE);
  r.set_regex("x");
  EXPECT_EQ((*ConstraintSpecOf(r, ToolCallFormat::kHermes))->kind, ConstraintKind::kRegex);
}

TEST(ConstraintSpecTest, ForcedCallsTakeNoOtherConstraint) {
  v1::GenerateRequest r = Chat();
  AddTool(r, "f");
  r.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
  // A model without a tool-call format gets llama3_json's plain JSON calls.
  absl::StatusOr<std::optional<ConstraintSpec>> spec = ConstraintSpecOf(r, ToolCallFormat::kNone);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_value());
  EXPECT_EQ((*spec)->kind, ConstraintKind::kGrammar);
  EXPECT_EQ((*spec)->text, (*ConstraintSpecOf(r, ToolCallFormat::kLlama3Json))->text);
  EXPECT_THAT((*spec)->text, HasSubstr("\"parameters\\\": "));
  EXPECT_THAT((*spec)->text, Not(HasSubstr("tool_call")));
  r.set_json_object(true);
  spec = ConstraintSpecOf(r, ToolCallFormat::kHermes);
  EXPECT_THAT(
      spec.status().message(),
      HasSubstr("messages.tool_choice forces tool calls, which is a constraint of its own"));
}

// The fake model's vocabulary: one token per byte, EOS 257.
std::unique_ptr<ConstraintCompiler> FakeModelCompiler(int32_t max_states = 50000) {
  ConstraintVocabulary vocabulary;
  for (int b = 0; b < 256; ++b) vocabulary.token_bytes.emplace_back(1, static_cast<char>(b));
  vocabulary.eos_token_ids = {257};
  vocabulary.vocab_size = testing::FakeModelFrontend::kVocabSize;
  ConstraintLimits limits;
  limits.max_states = max_states;
  return *ConstraintCompiler::Create(std::move(vocabulary), limits);
}

absl::StatusOr<RequestParams> Build(RequestBuilder& builder, const v1::GenerateRequest& request) {
  return builder.Build(request, absl::Now(), absl::InfiniteFuture());
}

TEST(RequestBuilderConstraintTest, CompiledOncePerTextAndSharedByRequests) {
  const testing::FakeModelFrontend model;
  std::unique_ptr<ConstraintCompiler> compiler = FakeModelCompiler();
  RequestBuilder builder(model, {}, {}, {compiler.get(), ToolCallFormat::kHermes});
  v1::GenerateRequest r;
  r.set_prompt("x");
  absl::StatusOr<RequestParams> plain = Build(builder, r);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->constraint, nullptr);
  r.set_json_schema(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  absl::StatusOr<RequestParams> first = Build(builder, r);
  absl::StatusOr<RequestParams> second = Build(builder, r);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_NE(first->constraint, nullptr);
  EXPECT_EQ(first->constraint, second->constraint);
  EXPECT_EQ(first->constraint->vocab_size(), testing::FakeModelFrontend::kVocabSize);
  EXPECT_EQ(compiler->cache_stats().hits, 1);
  // A forced tool call compiles its grammar; its matcher takes a valid call.
  v1::GenerateRequest chat = Chat();
  AddTool(chat, "now");
  chat.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
  absl::StatusOr<RequestParams> tools = Build(builder, chat);
  ASSERT_TRUE(tools.ok()) << tools.status();
  ASSERT_NE(tools->constraint, nullptr);
  std::unique_ptr<ConstraintMatcher> matcher = tools->constraint->NewMatcher();
  for (unsigned char c :
       std::string("<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>")) {
    ASSERT_TRUE(matcher->AcceptToken(c)) << c;
  }
  EXPECT_TRUE(matcher->IsAccepting());
}

TEST(RequestBuilderConstraintTest, CompileErrorsAndLimitsAreInvalidArgument) {
  const testing::FakeModelFrontend model;
  std::unique_ptr<ConstraintCompiler> compiler = FakeModelCompiler(/*max_states=*/40);
  RequestBuilder builder(model, {}, {}, {compiler.get(), ToolCallFormat::kHermes});
  v1::GenerateRequest r;
  r.set_prompt("x");
  r.set_regex("(ab");
  absl::StatusOr<RequestParams> params = Build(builder, r);
  EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(params.status().message(), HasSubstr("regex: at offset"));
  r.set_regex("[a-z]{1,200}");
  params = Build(builder, r);
  EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(params.status().message(), "regex: the automaton exceeds the limit of 40 states");
  v1::GenerateRequest chat = Chat();
  AddTool(chat, "f", R"({"type": "object", "properties": {"a": {"patternProperties": {}}}})");
  chat.mutable_messages()->set_tool_choice(v1::TOOL_CHOICE_FUNCTION);
  chat.mutable_messages()->set_tool_choice_function("f");
  params = Build(builder, chat);
  EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(params.status().message(),
              HasSubstr("messages.tools[0].parameters: at /properties/a"));

  RequestBuilder without(model);
  r.set_regex("a");
  params = Build(without, r);
  EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(params.status().message(), "regex: this server compiles no constraints");
}

TEST(StructuredOutputFlagsTest, Validated) {
  ServerConfig c;
  c.model = "m.gguf";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  c.tool_call_parser = "mistral";
  EXPECT_EQ(ValidateServerConfig(c).message(),
            "tool_call_parser must be one of auto, none, hermes, llama3_json; got \"mistral\"");
  c.tool_call_parser = "llama3_json";
  c.max_constraint_bytes = 0;
  EXPECT_THAT(ValidateServerConfig(c).message(), HasSubstr("max_constraint_bytes must be >= 1"));
  c.max_constraint_bytes = 1;
  c.max_constraint_states = 0;
  EXPECT_THAT(ValidateServerConfig(c).message(), HasSubstr("max_constraint_states"));
  c.max_constraint_states = 1;
  c.constraint_compile_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(c).message(), HasSubstr("constraint_compile_timeout"));
}

}  // namespace
}  // namespace loom
