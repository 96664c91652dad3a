// Response shapes against JSON written from the OpenAI API reference (plus
// vLLM's stop_reason and max_model_len extensions).
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "openai/chat_response.h"
#include "openai/completion_response.h"
#include "openai/models_response.h"

namespace loom::openai {
namespace {

using nlohmann::json;

std::string TokenName(int32_t id) { return absl::StrCat("t", id); }

ResponseContext Context(const std::string& id) {
  ResponseContext context;
  context.id = id;
  context.created = 1700000000;
  context.model = "llama";
  context.token_text = TokenName;
  return context;
}

v1::Usage MakeUsage(uint32_t prompt, uint32_t completion, uint32_t cached) {
  v1::Usage usage;
  usage.set_prompt_tokens(prompt);
  usage.set_completion_tokens(completion);
  usage.set_cached_prompt_tokens(cached);
  usage.set_total_seconds(1.5);  // Loom's timings are not part of OpenAI's usage
  return usage;
}

v1::TokenLogprob MakeLogprob(int32_t id, float logprob, std::vector<v1::TopLogprob> top = {}) {
  v1::TokenLogprob token;
  token.set_token_id(id);
  token.set_logprob(logprob);
  for (const v1::TopLogprob& t : top) *token.add_top() = t;
  return token;
}

v1::TopLogprob Top(int32_t id, float logprob) {
  v1::TopLogprob top;
  top.set_token_id(id);
  top.set_logprob(logprob);
  return top;
}

// Strips the SSE framing of one frame.
json Frame(const std::string& frame) {
  EXPECT_TRUE(absl::StartsWith(frame, "data: ")) << frame;
  EXPECT_TRUE(absl::EndsWith(frame, "\n\n")) << frame;
  return json::parse(frame.substr(6, frame.size() - 8));
}

TEST(CompletionResponseTest, TextCompletion) {
  v1::GenerateResponse response;
  v1::Completion& c = *response.add_completions();
  c.set_text(" world");
  c.set_finish_reason(v1::FINISH_REASON_LENGTH);
  *response.mutable_usage() = MakeUsage(5, 7, 2);
  EXPECT_EQ(json::parse(RenderCompletionResponse(Context("cmpl-1"), {&response, 1})),
            json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "llama",
    "choices": [{"index": 0, "text": " world", "logprobs": null, "finish_reason": "length",
                 "stop_reason": null}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
              "prompt_tokens_details": {"cached_tokens": 2}}})"));
}

TEST(CompletionResponseTest, SeveralPromptsWithNAndEcho) {
  ResponseContext context = Context("cmpl-2");
  context.options.n = 2;
  context.options.echo = true;
  std::vector<v1::GenerateResponse> responses(2);
  for (int p = 0; p < 2; ++p) {
    for (uint32_t i = 0; i < 2; ++i) {
      v1::Completion& c = *responses[p].add_completions();
      c.set_index(i);
      c.set_text(absl::StrCat("c", p, i));
      c.set_finish_reason(v1::FINISH_REASON_STOP);
      if (i == 1) c.set_stop_reason("\n");
    }
    *responses[p].mutable_usage() = MakeUsage(3, 4, 1);
  }
  const std::vector<std::string> prompts = {"A:", "B:"};
  EXPECT_EQ(json::parse(RenderCompletionResponse(context, responses, prompts)), json::parse(R"({
    "id": "cmpl-2", "object": "text_completion", "created": 1700000000, "model": "llama",
    "choices": [
      {"index": 0, "text": "A:c00", "logprobs": null, "finish_reason": "stop", "stop_reason": null},
      {"index": 1, "text": "A:c01", "logprobs": null, "finish_reason": "stop", "stop_reason": "\n"},
      {"index": 2, "text": "B:c10", "logprobs": null, "finish_reason": "stop", "stop_reason": null},
      {"index": 3, "text": "B:c11", "logprobs": null, "finish_reason": "stop", "stop_reason": "\n"}],
    "usage": {"prompt_tokens": 6, "completion_tokens": 8, "total_tokens": 14,
              "prompt_tokens_details": {"cached_tokens": 2}}})"));
}

TEST(CompletionResponseTest, CompletionsLogprobsFormat) {
  ResponseContext context = Context("cmpl-3");
  context.options.logprobs = 2;
  v1::GenerateResponse response;
  v1::Completion& c = *response.add_completions();
  c.set_text("t10t2");
  c.set_finish_reason(v1::FINISH_REASON_STOP);
  *c.add_logprobs() = MakeLogprob(10, -0.5f, {Top(10, -0.5f), Top(11, -1.25f)});
  *c.add_logprobs() = MakeLogprob(2, -0.25f);
  context.options.echo = true;
  const std::vector<std::string> prompts = {"Q"};
  const json body = json::parse(RenderCompletionResponse(context, {&response, 1}, prompts));
  EXPECT_EQ(body["choices"][0]["text"], "Qt10t2");
  EXPECT_EQ(body["choices"][0]["logprobs"], json::parse(R"({
    "tokens": ["t10", "t2"], "token_logprobs": [-0.5, -0.25],
    "top_logprobs": [{"t10": -0.5, "t11": -1.25}, null], "text_offset": [1, 4]})"));
}

v1::TokenLogprob MakeRanked(int32_t id, float logprob, int32_t rank,
                            std::vector<v1::TopLogprob> top = {}) {
  v1::TokenLogprob token = MakeLogprob(id, logprob, std::move(top));
  token.set_rank(rank);
  return token;
}

// A prompt of tokens 5, 6, 7 scored with one alternative each.
v1::GenerateResponse ScoredPrompt() {
  v1::GenerateResponse response;
  response.set_first_prompt_token_id(5);
  *response.add_prompt_logprobs() = MakeRanked(6, -1.5f, 2, {Top(9, -0.5f)});
  *response.add_prompt_logprobs() = MakeRanked(7, -0.25f, 1, {Top(7, -0.25f)});
  *response.mutable_usage() = MakeUsage(3, 0, 0);
  return response;
}

TEST(CompletionResponseTest, EchoWithLogprobsScoresThePromptFirst) {
  ResponseContext context = Context("cmpl-6");
  context.options.echo = true;
  context.options.logprobs = 1;
  v1::GenerateResponse response = ScoredPrompt();
  v1::Completion& c = *response.add_completions();
  c.set_text("t8");
  c.set_finish_reason(v1::FINISH_REASON_LENGTH);
  *c.add_logprobs() = MakeLogprob(8, -2.0f, {Top(8, -2.0f)});
  const std::vector<std::string> prompts = {"t5t6t7"};
  const json body = json::parse(RenderCompletionResponse(context, {&response, 1}, prompts));
  EXPECT_EQ(body["choices"][0]["text"], "t5t6t7t8");
  EXPECT_EQ(body["choices"][0]["logprobs"], json::parse(R"({
    "tokens": ["t5", "t6", "t7", "t8"], "token_logprobs": [null, -1.5, -0.25, -2.0],
    "top_logprobs": [null, {"t9": -0.5}, {"t7": -0.25}, {"t8": -2.0}],
    "text_offset": [0, 2, 4, 6]})"));
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));
}

TEST(CompletionResponseTest, MaxTokensZeroEchoesOnlyThePrompt) {
  ResponseContext context = Context("cmpl-7");
  context.options.echo = true;
  context.options.logprobs = 1;
  v1::GenerateResponse response = ScoredPrompt();
  response.add_completions()->set_finish_reason(v1::FINISH_REASON_LENGTH);
  const std::vector<std::string> prompts = {"t5t6t7"};
  const json body = json::parse(RenderCompletionResponse(context, {&response, 1}, prompts));
  EXPECT_EQ(body["choices"][0]["text"], "t5t6t7");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][0]["logprobs"]["token_logprobs"], json::parse("[null, -1.5, -0.25]"));
  EXPECT_EQ(body["usage"]["completion_tokens"], 0);
}

TEST(CompletionResponseTest, VllmPromptLogprobsField) {
  ResponseContext context = Context("cmpl-8");
  context.options.prompt_logprobs = 1;
  v1::GenerateResponse response = ScoredPrompt();
  response.add_completions()->set_text("t8");
  const json body = json::parse(RenderCompletionResponse(context, {&response, 1}));
  EXPECT_EQ(body["choices"][0]["logprobs"], nullptr);
  EXPECT_EQ(body["choices"][0]["prompt_logprobs"], json::parse(R"([null,
    {"6": {"logprob": -1.5, "rank": 2, "decoded_token": "t6"},
     "9": {"logprob": -0.5, "rank": 1, "decoded_token": "t9"}},
    {"7": {"logprob": -0.25, "rank": 1, "decoded_token": "t7"}}])"));
}

TEST(CompletionResponseTest, StreamChunkCarriesPromptLogprobsOnce) {
  ResponseContext context = Context("cmpl-9");
  context.options.prompt_logprobs = 0;
  v1::GenerateStreamResponse first;
  first.set_text("t8");
  first.set_first_prompt_token_id(5);
  *first.add_prompt_logprobs() = MakeRanked(6, -1.5f, 2);
  const json chunk = Frame(RenderCompletionChunk(context, first, 0));
  EXPECT_EQ(chunk["choices"][0]["prompt_logprobs"], json::parse(R"([null,
    {"6": {"logprob": -1.5, "rank": 2, "decoded_token": "t6"}}])"));
  v1::GenerateStreamResponse later;
  later.set_text("t9");
  EXPECT_FALSE(
      Frame(RenderCompletionChunk(context, later, 0))["choices"][0].contains("prompt_logprobs"));
}

TEST(CompletionResponseTest, StreamChunks) {
  ResponseContext context = Context("cmpl-4");
  context.options.n = 2;
  context.options.include_usage = true;
  v1::GenerateStreamResponse delta;
  delta.set_index(1);
  delta.set_text("He");
  EXPECT_EQ(Frame(RenderCompletionChunk(context, delta, 1)), json::parse(R"({
    "id": "cmpl-4", "object": "text_completion", "created": 1700000000, "model": "llama",
    "choices": [{"index": 3, "text": "He", "logprobs": null, "finish_reason": null,
                 "stop_reason": null}],
    "usage": null})"));
  delta.set_text("");
  delta.set_finish_reason(v1::FINISH_REASON_ABORTED);
  EXPECT_EQ(Frame(RenderCompletionChunk(context, delta, 0))["choices"][0]["finish_reason"],
            "abort");
  EXPECT_EQ(Frame(RenderCompletionUsageChunk(context, MakeUsage(1, 2, 0))), json::parse(R"({
    "id": "cmpl-4", "object": "text_completion", "created": 1700000000, "model": "llama",
    "choices": [],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
              "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(CompletionResponseTest, StreamChunkLogprobsContinueTheTextOffset) {
  ResponseContext context = Context("cmpl-5");
  context.options.logprobs = 0;
  v1::GenerateStreamResponse delta;
  delta.set_text("t7");
  *delta.add_logprobs() = MakeLogprob(7, -std::numeric_limits<float>::infinity());
  const json chunk = Frame(RenderCompletionChunk(context, delta, 0, 12));
  EXPECT_EQ(chunk["choices"][0]["logprobs"], json::parse(R"({
    "tokens": ["t7"], "token_logprobs": [-9999.0], "top_logprobs": [null],
    "text_offset": [12]})"));
  EXPECT_FALSE(chunk.contains("usage"));
}

TEST(ChatResponseTest, ChatCompletion) {
  v1::GenerateResponse response;
  v1::Completion& c = *response.add_completions();
  c.set_text("Hello there!");
  c.set_finish_reason(v1::FINISH_REASON_STOP);
  *response.mutable_usage() = MakeUsage(9, 12, 0);
  EXPECT_EQ(json::parse(RenderChatCompletion(Context("chatcmpl-1"), response)), json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "llama",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there!"},
                 "logprobs": null, "finish_reason": "stop", "stop_reason": null}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
              "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(ChatResponseTest, ChatLogprobsFormat) {
  ResponseContext context = Context("chatcmpl-2");
  context.options.logprobs = 1;
  context.token_text = [](int32_t id) { return id == 1 ? std::string("Hi") : std::string("\xc3"); };
  v1::GenerateResponse response;
  v1::Completion& c = *response.add_completions();
  c.set_text("Hi");
  *c.add_logprobs() = MakeLogprob(1, -0.5f, {Top(1, -0.5f)});
  *c.add_logprobs() = MakeLogprob(2, -2.0f, {Top(1, -0.75f)});
  const json body = json::parse(RenderChatCompletion(context, response));
  EXPECT_EQ(body["choices"][0]["logprobs"], json::parse(R"({"content": [
    {"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
     "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]},
    {"token": "\ufffd", "logprob": -2.0, "bytes": [195],
     "top_logprobs": [{"token": "Hi", "logprob": -0.75, "bytes": [72, 105]}]}]})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], nullptr);
}

TEST(ChatResponseTest, PromptLogprobsSitBesideTheChoices) {
  ResponseContext context = Context("chatcmpl-9");
  context.options.prompt_logprobs = 1;
  v1::GenerateResponse response = ScoredPrompt();
  response.add_completions()->set_text("hi");
  const json body = json::parse(RenderChatCompletion(context, response));
  ASSERT_TRUE(body.contains("prompt_logprobs"));
  EXPECT_EQ(body["prompt_logprobs"].size(), 3u);
  EXPECT_EQ(body["prompt_logprobs"][0], nullptr);
  EXPECT_EQ(body["prompt_logprobs"][2]["7"]["rank"], 1);
  EXPECT_FALSE(json::parse(RenderChatCompletion(Context("chatcmpl-10"), response))
                   .contains("prompt_logprobs"));
}

TEST(ChatResponseTest, ChatChunks) {
  ResponseContext context = Context("chatcmpl-3");
  v1::GenerateStreamResponse delta;
  delta.set_text("Hel");
  EXPECT_EQ(Frame(RenderChatChunk(context, delta, /*first=*/true)), json::parse(R"({
    "id": "chatcmpl-3", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "llama",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"},
                 "logprobs": null, "finish_reason": null, "stop_reason": null}]})"));
  delta.set_text("lo");
  EXPECT_EQ(Frame(RenderChatChunk(context, delta, false))["choices"][0]["delta"],
            json::parse(R"({"content": "lo"})"));
  delta.set_text("");
  delta.set_finish_reason(v1::FINISH_REASON_LENGTH);
  const json last = Frame(RenderChatChunk(context, delta, false));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
}

TEST(ChatResponseTest, ToolCallsInTheMessage) {
  v1::GenerateResponse response;
  v1::Completion& called = *response.add_completions();
  called.set_text("<tool_call>...</tool_call>");
  called.set_finish_reason(v1::FINISH_REASON_STOP);
  v1::Completion& cut = *response.add_completions();
  cut.set_index(1);
  cut.set_finish_reason(v1::FINISH_REASON_LENGTH);
  v1::Completion& plain = *response.add_completions();
  plain.set_index(2);
  plain.set_finish_reason(v1::FINISH_REASON_STOP);
  const ChatChoiceMessage messages[] = {
      {"", {{0, "call_a", "get_weather", R"({"city": "Paris"})"}, {1, "call_b", "now", "{}"}}},
      {"Let me see.", {{0, "call_c", "now", "{"}}},
      {"Just text.", {}}};
  const json body = json::parse(RenderChatCompletion(Context("chatcmpl-5"), response, messages));
  EXPECT_EQ(body["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": null,
    "tool_calls": [
      {"id": "call_a", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": "{}"}}]})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["choices"][1]["message"]["content"], "Let me see.");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");  // cut short: not a finished call
  EXPECT_EQ(body["choices"][2]["message"], json::parse(R"({"role": "assistant",
                                                            "content": "Just text."})"));
  EXPECT_EQ(body["choices"][2]["finish_reason"], "stop");
}

TEST(ChatResponseTest, ToolCallChunks) {
  ResponseContext context = Context("chatcmpl-6");
  v1::GenerateStreamResponse delta;
  delta.set_text("<tool_call>\n{\"name\": \"now\", \"arguments\": {");
  const ChatChoiceMessage first = {"", {{0, "call_x", "now", "{"}}};
  EXPECT_EQ(Frame(RenderChatChunk(context, delta, true, &first, true))["choices"][0]["delta"],
            json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
              {"index": 0, "id": "call_x", "type": "function",
               "function": {"name": "now", "arguments": "{"}}]})"));
  const ChatChoiceMessage more = {"", {{0, "", "", "}"}}};
  delta.set_text("}}\n</tool_call>");
  delta.set_finish_reason(v1::FINISH_REASON_STOP);
  const json last = Frame(RenderChatChunk(context, delta, false, &more, true));
  EXPECT_EQ(last["choices"][0]["delta"],
            json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})"));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
  // Content the parser let through replaces the raw text.
  const ChatChoiceMessage text = {"Sure.", {}};
  delta.set_finish_reason(v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(Frame(RenderChatChunk(context, delta, false, &text, false))["choices"][0]["delta"],
            json::parse(R"({"content": "Sure."})"));
}

TEST(ChatResponseTest, UsageChunk) {
  ResponseContext context = Context("chatcmpl-4");
  context.options.include_usage = true;
  v1::GenerateStreamResponse delta;
  delta.set_text("x");
  EXPECT_EQ(Frame(RenderChatChunk(context, delta, false))["usage"], nullptr);
  EXPECT_EQ(Frame(RenderChatUsageChunk(context, MakeUsage(4, 5, 3))), json::parse(R"({
    "id": "chatcmpl-4", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "llama", "choices": [],
    "usage": {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9,
              "prompt_tokens_details": {"cached_tokens": 3}}})"));
}

TEST(ModelsResponseTest, ModelList) {
  v1::ModelInfo model;
  model.set_name("llama-3-8b");
  model.set_max_model_len(8192);
  model.set_vocab_size(128256);
  EXPECT_EQ(json::parse(RenderModelList({&model, 1}, 1700000000)), json::parse(R"({
    "object": "list",
    "data": [{"id": "llama-3-8b", "object": "model", "created": 1700000000, "owned_by": "loom",
              "root": "llama-3-8b", "max_model_len": 8192,
              "vocab_size": 128256}]})"));
  EXPECT_EQ(json::parse(RenderModelList({}, 0)), json::parse(R"({"object": "list", "data": []})"));
}

}  // namespace
}  // namespace loom::openai
