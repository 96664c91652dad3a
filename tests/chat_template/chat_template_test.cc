#include "chat_template/chat_template.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "chat_template/builtin_templates.h"
#include "gtest/gtest.h"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::loom::testing::ReadFixtureJson;

std::vector<ChatMessage> Messages(const nlohmann::json& j) {
  std::vector<ChatMessage> messages;
  for (const nlohmann::json& m : j) messages.push_back({m["role"], m["content"]});
  return messages;
}

// Every case renders exactly as transformers' apply_chat_template, or fails
// with the template's own raise_exception message.
void ExpectMatchesFixture(const std::string& fixture, const std::string& bos,
                          const std::string& eos) {
  const nlohmann::json f = ReadFixtureJson(fixture);
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t =
      ChatTemplate::FromJinja(f["template"], bos, eos);
  ASSERT_TRUE(t.ok()) << fixture << ": " << t.status();
  for (const nlohmann::json& c : f["cases"]) {
    const std::vector<ChatMessage> messages = Messages(c["messages"]);
    absl::StatusOr<std::string> rendered = (*t)->Render(messages, c["add_generation_prompt"]);
    if (c.contains("error")) {
      ASSERT_FALSE(rendered.ok()) << fixture;
      EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(rendered.status().message(), c["error"].get<std::string>());
    } else {
      ASSERT_TRUE(rendered.ok()) << fixture << ": " << rendered.status();
      EXPECT_EQ(*rendered, c["rendered"].get<std::string>()) << fixture;
    }
  }
}

TEST(ChatTemplateTest, SmolLm2ChatMlMatchesTransformers) {
  ExpectMatchesFixture("smollm2/chat.json", "<|im_start|>", "<|im_end|>");
}

TEST(ChatTemplateTest, TinyModelTemplatesMatchTransformers) {
  ExpectMatchesFixture("tiny/llama3/chat.json", "<|begin_of_text|>", "<|eot_id|>");
  // Llama 3.1's template: tool branches, defaults for undefined variables.
  ExpectMatchesFixture("tiny/llama32_tied/chat.json", "<|begin_of_text|>", "<|eot_id|>");
  ExpectMatchesFixture("tiny/llama2/chat.json", "<s>", "</s>");
  ExpectMatchesFixture("tiny/mistral/chat.json", "<s>", "</s>");
  ExpectMatchesFixture("tiny/qwen2/chat.json", "", "<|im_end|>");
}

absl::StatusOr<std::string> RenderSource(const std::string& source,
                                         std::vector<ChatMessage> messages = {{"user", "hi"}}) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::FromJinja(source, "<s>", "</s>");
  if (!t.ok()) return t.status();
  return (*t)->Render(messages, /*add_generation_prompt=*/true);
}

TEST(ChatTemplateTest, WhitespaceControl) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(*RenderSource("{% if true %}\n  a\n    {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(*RenderSource("x  {{- ' y ' -}}  z"), "x y z");
  EXPECT_EQ(*RenderSource("a {#- comment -#} b"), "ab");
  EXPECT_EQ(*RenderSource("{%+ if true %}k{% endif +%}\n"), "k\n");
}

TEST(ChatTemplateTest, ExpressionsFiltersAndTests) {
  EXPECT_EQ(*RenderSource("{{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 3 }} {{ 1 / 2 }} {{ 3 ~ 'x' }}"),
            "3 2 8 0.5 3x");
  EXPECT_EQ(*RenderSource("{{ '  a b  ' | trim | upper }}|{{ [1, 2, 3] | length }}"), "A B|3");
  EXPECT_EQ(*RenderSource("{{ messages[0]['role'] }}{{ messages[0].content | title }}"), "userHi");
  EXPECT_EQ(
      *RenderSource("{{ x is defined }} {{ none is none }} {{ 3 is odd }} {{ 'a' in 'cat' }}"),
      "False True True True");
  EXPECT_EQ(*RenderSource("{{ 'yes' if messages | length > 0 else 'no' }}"), "yes");
  EXPECT_EQ(*RenderSource("{{ [1, 2, 3, 4][1:] }} {{ 'hello'[::-1] }} {{ [5, 6][-1] }}"),
            "[2, 3, 4] olleh 6");
  EXPECT_EQ(*RenderSource("{{ {'a': [true, none, 'q\"']} | tojson }}"),
            R"({"a": [true, null, "q\""]})");
  EXPECT_EQ(*RenderSource("{{ x | default('d') }} {{ '' | default('e', true) }}"), "d e");
  EXPECT_EQ(*RenderSource("{{ 'a,b'.split(',') | join('+') }} {{ ' x '.strip() }}"), "a+b x");
}

TEST(ChatTemplateTest, LoopsScopesAndNamespaces) {
  const std::vector<ChatMessage> msgs = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
  EXPECT_EQ(*RenderSource("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}"
                          "{% if not loop.last %},{% endif %}{% endfor %}",
                          msgs),
            "1s,2u,3a");
  EXPECT_EQ(*RenderSource("{% set ns = namespace(n=0) %}{% for m in messages %}"
                          "{% set ns.n = ns.n + 1 %}{% set local = 1 %}{% endfor %}"
                          "{{ ns.n }}{{ local is defined }}",
                          msgs),
            "3False");
  EXPECT_EQ(*RenderSource("{% for m in messages if m.role != 'system' %}{{ m.content }}"
                          "{% else %}none{% endfor %}",
                          msgs),
            "ua");
  EXPECT_EQ(*RenderSource("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
                          "{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(*RenderSource("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}"), "a=1");
}

// continue_final_message: the rendered chat ends where the last message's
// content does, whether the template writes it as given or trimmed.
TEST(ChatTemplateTest, EndAtFinalContentOpensTheLastTurn) {
  const char* kTemplate =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>\n{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  const char* kTrimming =
      "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</s>\n{% endfor %}";
  const std::vector<ChatMessage> turns = {{"user", "Hi Hi"}, {"assistant", "Hi "}};
  for (const char* source : {kTemplate, kTrimming}) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::FromJinja(source, "", "");
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::string> rendered = (*t)->Render(turns, /*add_generation_prompt=*/false);
    ASSERT_TRUE(rendered.ok()) << rendered.status();
    ASSERT_TRUE(EndAtFinalContent(turns.back().content, *rendered).ok());
    // The last occurrence: the user's "Hi Hi" is not where the reply goes on.
    EXPECT_EQ(*rendered, source == kTemplate ? "<user>Hi Hi</s>\n<assistant>Hi "
                                             : "<user>Hi Hi</s>\n<assistant>Hi")
        << source;
  }
  std::string rendered = "<user>Hi</s>\n<assistant>Hello</s>\n";
  const absl::Status blank = EndAtFinalContent(" \n", rendered);
  EXPECT_EQ(blank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blank.message().rfind("messages.continue_final_message", 0), 0u) << blank;
  const absl::Status missing = EndAtFinalContent("Goodbye", rendered);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rendered, "<user>Hi</s>\n<assistant>Hello</s>\n");
}

// Gemma's turn format for Gemma 3 files without a template: a system message
// opens the first turn, assistant turns are the model's, contents trimmed.
TEST(ChatTemplateTest, BuiltinGemmaTemplate) {
  EXPECT_FALSE(BuiltinChatTemplate("LlamaForCausalLM").has_value());
  const std::optional<std::string_view> source = BuiltinChatTemplate("Gemma3ForCausalLM");
  ASSERT_TRUE(source.has_value());
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t =
      ChatTemplate::FromJinja(std::string(*source), "<bos>", "<eos>");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<ChatMessage> turns = {{"system", "Be brief. "},
                                          {"user", "Hi"},
                                          {"assistant", " Hello!"},
                                          {"user", "Capital of France?"}};
  EXPECT_EQ(*(*t)->Render(turns, /*add_generation_prompt=*/true),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(*(*t)->Render(std::vector<ChatMessage>{{"user", "Hi"}}, false),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n");
  const absl::StatusOr<std::string> tool =
      (*t)->Render(std::vector<ChatMessage>{{"user", "Hi"}, {"tool", "42"}}, true);
  EXPECT_EQ(tool.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, RaiseExceptionIsInvalidArgument) {
  absl::StatusOr<std::string> r = RenderSource("{{ raise_exception('no system role') }}");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "no system role");
}

TEST(ChatTemplateTest, UnsupportedConstructsFailCleanly) {
  EXPECT_EQ(RenderSource("{% call f() %}x{% endcall %}").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RenderSource("{{ x | wordwrap }}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RenderSource("{{ 'a'.zfill(3) }}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(RenderSource("{% if true %}unclosed").ok());
  EXPECT_FALSE(RenderSource("{{ 1 + }}").ok());
  EXPECT_FALSE(RenderSource("{{ 'a' + 1 }}").ok());
  EXPECT_FALSE(RenderSource("{{ 'unterminated }}").ok());
  EXPECT_FALSE(RenderSource("{{ " + std::string(10000, '(') + "1 }}").ok());
  EXPECT_FALSE(RenderSource(std::string(5000, '{') + "% if true %}").ok());
  EXPECT_FALSE(RenderSource("{% for i in range(100000000) %}{% endfor %}").ok());
}

// Every limit fails with its own message, whatever the template tries.
void ExpectExhausted(const std::string& source, const std::string& message_part) {
  absl::StatusOr<std::string> r = RenderSource(source);
  ASSERT_FALSE(r.ok()) << source.substr(0, 80);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status();
}

TEST(ChatTemplateTest, HostileTemplatesHitLimitsNotMemory) {
  // 10^12 bytes: refused before anything is allocated.
  ExpectExhausted("{{ ('x' * 1000000) * 1000000 }}", "a string of 1000000000000 bytes");
  ExpectExhausted("{{ 'x' * 9223372036854775807 }}", "exceeds the limit of 67108864 bytes");
  ExpectExhausted("{{ ('x' * 60000000) ~ ('x' * 60000000) }}", "a string of 120000000 bytes");
  ExpectExhausted("{{ ('x' * 1000000).replace('x', '" + std::string(80, 'y') + "') }}",
                  "a string of 80000000 bytes");
  ExpectExhausted("{{ ('x' * 1000000) | replace('x', '" + std::string(80, 'y') + "') }}",
                  "a string of 80000000 bytes");
  ExpectExhausted("{{ range(100000) | join('x' * 1000) }}", "exceeds the limit of 67108864 bytes");
  // Each string fits, but together they would not.
  ExpectExhausted(
      "{% set ns = namespace(l=[]) %}{% for i in range(100) %}"
      "{% set ns.l = ns.l + ['x' * 10000000] %}{% endfor %}",
      "built in one render");
  ExpectExhausted("{% for i in range(40) %}{{ 'x' * 10000000 }}{% endfor %}",
                  "output of 70000000 bytes");
  // Loops with empty bodies count too: 10^12 iterations would never end.
  ExpectExhausted(
      "{% set r = range(1000000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}",
      "rendering steps exceeds the limit of 1000000");
  EXPECT_EQ(ChatTemplate::FromJinja(std::string(2u << 20, 'x'), "", "").status().code(),
            absl::StatusCode::kResourceExhausted);
  // One new value per character of a 60 MB string is over the budget too.
  ExpectExhausted("{% for c in 'x' * 60000000 %}{% endfor %}", "built in one render");
}

TEST(ChatTemplateTest, LongChainsFailAtParseWithoutDeepRecursion) {
  // A left-associative chain nests one level per link; half a million links
  // would overflow the stack when the tree is freed.
  auto chain = [](const std::string& link, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += link;
    return s;
  };
  for (const std::string& links :
       {chain("+1", 200000), chain(".a", 200000), chain("|e", 200000), chain(" or 1", 200000),
        chain("==1", 200000), chain("[0]", 200000), chain("(1)", 200000)}) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> t =
        ChatTemplate::FromJinja("{{ 1" + links + " }}", "", "");
    ASSERT_FALSE(t.ok()) << links.substr(0, 10);
    EXPECT_NE(t.status().message().find("nested too deep"), std::string::npos) << t.status();
  }
  std::string ok = "{{ 1";
  for (int i = 0; i < 100; ++i) ok += "+1";
  EXPECT_EQ(*RenderSource(ok + " }}"), "101");
}

TEST(ChatTemplateTest, RandomGarbageNeverCrashes) {
  const std::string alphabet = "{}%#-+()[]'\".|,:=~ abcdefiorsnt0123\n";
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string source;
    const int len = static_cast<int>(rng() % 40);
    for (int j = 0; j < len; ++j) source.push_back(alphabet[rng() % alphabet.size()]);
    (void)RenderSource(source);  // any status is fine; it must not crash or hang
  }
}

}  // namespace
}  // namespace loom
