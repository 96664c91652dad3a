// Chat templates rendering OpenAI tools and tool calls: the Hermes-style
// fixture template, Llama 3.1's and one built on macros, against jinja2
// configured as transformers (tools/golden/chat_tools.py), plus the Jinja
// features those templates use.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::loom::testing::ReadFixtureJson;
using ::loom::testing::ReadFixtureText;
using Json = nlohmann::ordered_json;

std::vector<ChatMessage> Messages(const Json& messages) {
  std::vector<ChatMessage> out;
  for (const Json& m : messages) {
    ChatMessage message{m["role"], m.value("content", "")};
    for (const Json& call : m.value("tool_calls", Json::array())) {
      message.tool_calls.push_back(
          {call["id"], call["function"]["name"], call["function"]["arguments"]});
    }
    message.tool_call_id = m.value("tool_call_id", "");
    out.push_back(std::move(message));
  }
  return out;
}

std::vector<ChatTool> Tools(const Json& tools) {
  std::vector<ChatTool> out;
  for (const Json& t : tools) {
    const Json& f = t["function"];
    out.push_back({f["name"], f.value("description", ""),
                   f.contains("parameters") ? f["parameters"].dump() : ""});
  }
  return out;
}

std::unique_ptr<ChatTemplate> Template(const std::string& name, const Json& fixture) {
  std::string source;
  if (name == "macros") {
    source = fixture["macros"];
  } else {
    const std::string file = fixture["templates"][name];
    source = file.ends_with(".json") ? ReadFixtureJson(file)["template"].get<std::string>()
                                     : ReadFixtureText(file);
  }
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t =
      name == "llama31" ? ChatTemplate::FromJinja(source, "<|begin_of_text|>", "<|eot_id|>")
                        : ChatTemplate::FromJinja(source, "<|im_start|>", "<|im_end|>");
  EXPECT_TRUE(t.ok()) << name << ": " << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(ChatToolsTest, TemplatesRenderToolsAsTransformersDoes) {
  const Json fixture = Json::parse(ReadFixtureText("chat_tools.json"));
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  for (const char* name : {"hermes", "llama31", "macros"}) {
    templates[name] = Template(name, fixture);
    ASSERT_NE(templates[name], nullptr);
  }
  int cases = 0;
  for (const Json& c : fixture["cases"]) {
    const ChatTemplate& t = *templates.at(c["template"]);
    const std::vector<ChatMessage> messages = Messages(c["messages"]);
    const std::vector<ChatTool> tools = Tools(c["tools"]);
    absl::StatusOr<std::string> rendered = t.Render(messages, c["add_generation_prompt"], tools);
    SCOPED_TRACE(::testing::Message() << c["template"] << " case " << cases);
    if (c.contains("error")) {
      ASSERT_FALSE(rendered.ok());
      EXPECT_EQ(rendered.status().message(), c["error"].get<std::string>());
    } else {
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(*rendered, c["rendered"].get<std::string>());
    }
    ++cases;
  }
  EXPECT_EQ(cases, 18);
}

absl::StatusOr<std::string> Render(const std::string& source, std::vector<ChatTool> tools = {},
                                   std::vector<ChatMessage> messages = {{"user", "hi"}}) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::FromJinja(source, "", "");
  if (!t.ok()) return t.status();
  return (*t)->Render(messages, /*add_generation_prompt=*/false, tools);
}

TEST(ChatToolsTest, ToJsonKeepsKeyOrderAndIndents) {
  const std::vector<ChatTool> tools = {{"f", "", R"({"z": 1, "a": [true, null, 2.5, "é"]})"}};
  EXPECT_EQ(*Render("{{ tools[0].function.parameters | tojson }}", tools),
            R"({"z": 1, "a": [true, null, 2.5, "é"]})");
  EXPECT_EQ(*Render("{{ tools[0].function.parameters | tojson(indent=2) }}", tools),
            "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    2.5,\n    \"é\"\n  ]\n}");
  EXPECT_EQ(*Render("{{ {} | tojson(indent=2) }}{{ [] | tojson(2) }}"), "{}[]");
  EXPECT_EQ(
      *Render("{% for k, v in tools[0].function.parameters | items %}{{ k }}{% endfor %}", tools),
      "za");
  EXPECT_FALSE(Render("{{ 1 | tojson(indent=-1) }}").ok());
}

TEST(ChatToolsTest, Macros) {
  EXPECT_EQ(*Render("{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}"
                    "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', who='c') }}"),
            "Hi a! Hi b? Hi c.");
  EXPECT_EQ(*Render("{% macro count(n) %}{{ n }}{% if n > 0 %},{{ count(n - 1) }}{% endif %}"
                    "{% endmacro %}{{ count(3) }}"),
            "3,2,1,0");
  EXPECT_EQ(*Render("{% macro m(x) %}{% for i in [1, 2] %}{% break %}{% endfor %}{{ x }}"
                    "{% endmacro %}{% for j in [7, 8] %}{{ m(j) }}{% endfor %}"),
            "78");
  EXPECT_EQ(Render("{% macro m(x) %}{% endmacro %}{{ m(1, 2) }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% macro m(x) %}{% endmacro %}{{ m(y=1) }}").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Unbounded recursion ends at the evaluation depth limit, not the stack's.
  EXPECT_FALSE(Render("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}").ok());
  EXPECT_FALSE(Render("{% macro m(x %}{% endmacro %}").ok());
  EXPECT_FALSE(Render("{% macro m() %}no end").ok());
}

TEST(ChatToolsTest, SelectAndRejectFilters) {
  EXPECT_EQ(*Render("{{ ['a', 'b', 'c'] | reject('equalto', 'b') | join(',') }}"), "a,c");
  EXPECT_EQ(*Render("{{ ['a', 'b', 'c'] | select('equalto', 'b') | join(',') }}"), "b");
  EXPECT_EQ(*Render("{{ [0, 1, '', 'x'] | select | list | length }}"), "2");
}

TEST(ChatToolsTest, WithoutToolsTheTemplateSeesNone) {
  EXPECT_EQ(*Render("{{ tools is none }}"), "True");
  EXPECT_EQ(*Render("{{ tools | length }}", {{"f"}}), "1");
  EXPECT_EQ(*Render("{{ 'tool_calls' in messages[0] }}"), "False");
}

TEST(ChatToolsTest, BadJsonInToolsOrCallsIsInvalidArgument) {
  absl::StatusOr<std::string> bad_tool = Render("x", {{"f", "", "[1, 2]"}});
  EXPECT_EQ(bad_tool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_tool.status().message(), "the parameters of tool f must be a JSON object");
  ChatMessage call{"assistant", ""};
  call.tool_calls.push_back({"c1", "f", "{not json"});
  absl::StatusOr<std::string> bad_call = Render("x", {}, {call});
  EXPECT_EQ(bad_call.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_call.status().message(), "the arguments of tool call c1 must be a JSON object");
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  absl::StatusOr<std::string> too_deep = Render("x", {{"f", "", "{\"a\": " + deep + "}"}});
  EXPECT_EQ(too_deep.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
