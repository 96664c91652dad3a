#include "openai/chat_response.h"

#include <utility>

#include "openai/logprobs_json.h"
#include "openai/response_json.h"
#include "openai/sse.h"

namespace loom::openai {
namespace {

constexpr char kChunkObject[] = "chat.completion.chunk";

nlohmann::json LogprobsOrNull(const ResponseContext& context, const Logprobs& logprobs) {
  if (!context.options.logprobs.has_value()) return nullptr;
  return ChatLogprobsJson(logprobs, context.token_text);
}

// A message's tool_calls; a stream delta's (`delta`) carry only what is new.
nlohmann::json ToolCallsJson(const std::vector<ToolCallOut>& calls, bool delta) {
  nlohmann::json out = nlohmann::json::array();
  for (const ToolCallOut& call : calls) {
    nlohmann::json function = nlohmann::json::object();
    if (!delta || !call.id.empty()) function["name"] = call.name;
    function["arguments"] = call.arguments;
    nlohmann::json item = nlohmann::json::object();
    if (delta) item["index"] = call.index;
    if (!delta || !call.id.empty()) {
      item["id"] = call.id;
      item["type"] = "function";
    }
    item["function"] = std::move(function);
    out.push_back(std::move(item));
  }
  return out;
}

nlohmann::json FinishJson(v1::FinishReason reason, bool called) {
  if (called && reason == v1::FINISH_REASON_STOP) return "tool_calls";
  return FinishReasonJson(reason);
}

nlohmann::json MessageJson(const v1::Completion& completion, const ChatChoiceMessage* parsed) {
  nlohmann::json message = {{"role", "assistant"}};
  if (parsed == nullptr) {
    message["content"] = completion.text();
    return message;
  }
  const bool called = !parsed->tool_calls.empty();
  message["content"] =
      called && parsed->content.empty() ? nlohmann::json(nullptr) : nlohmann::json(parsed->content);
  if (called) message["tool_calls"] = ToolCallsJson(parsed->tool_calls, /*delta=*/false);
  return message;
}

}  // namespace

std::string RenderChatCompletion(const ResponseContext& context,
                                 const v1::GenerateResponse& response,
                                 std::span<const ChatChoiceMessage> messages) {
  nlohmann::json body = Envelope(context, "chat.completion");
  nlohmann::json choices = nlohmann::json::array();
  for (int i = 0; i < response.completions_size(); ++i) {
    const v1::Completion& completion = response.completions(i);
    const ChatChoiceMessage* parsed =
        static_cast<size_t>(i) < messages.size() ? &messages[static_cast<size_t>(i)] : nullptr;
    const bool called = parsed != nullptr && !parsed->tool_calls.empty();
    choices.push_back({{"index", completion.index()},
                       {"message", MessageJson(completion, parsed)},
                       {"logprobs", LogprobsOrNull(context, completion.logprobs())},
                       {"finish_reason", FinishJson(completion.finish_reason(), called)},
                       {"stop_reason", StopReasonJson(completion.stop_reason())}});
  }
  body["choices"] = std::move(choices);
  // vLLM puts the prompt's logprobs beside the choices: the prompt is shared.
  if (context.options.prompt_logprobs.has_value()) {
    body["prompt_logprobs"] = PromptLogprobsJson(response.prompt_logprobs(), context.token_text);
  }
  body["usage"] = UsageJson(response.usage());
  return Dump(body);
}

std::string RenderChatChunk(const ResponseContext& context, const v1::GenerateStreamResponse& delta,
                            bool first, const ChatChoiceMessage* parsed, bool called) {
  nlohmann::json body = Envelope(context, kChunkObject);
  nlohmann::json message = nlohmann::json::object();
  const std::string& text = parsed != nullptr ? parsed->content : delta.text();
  const bool has_calls = parsed != nullptr && !parsed->tool_calls.empty();
  if (first) message["role"] = "assistant";
  if (!text.empty() || (first && !has_calls)) message["content"] = text;
  if (first && text.empty() && has_calls) message["content"] = nullptr;
  if (has_calls) message["tool_calls"] = ToolCallsJson(parsed->tool_calls, /*delta=*/true);
  nlohmann::json choice = {{"index", delta.index()},
                           {"delta", std::move(message)},
                           {"logprobs", LogprobsOrNull(context, delta.logprobs())},
                           {"finish_reason", FinishJson(delta.finish_reason(), called)},
                           {"stop_reason", StopReasonJson(delta.stop_reason())}};
  body["choices"] = nlohmann::json::array({std::move(choice)});
  if (context.options.include_usage) body["usage"] = nullptr;
  return SseFrame(Dump(body));
}

std::string RenderChatUsageChunk(const ResponseContext& context, const v1::Usage& usage) {
  nlohmann::json body = Envelope(context, kChunkObject);
  body["choices"] = nlohmann::json::array();
  body["usage"] = UsageJson(usage);
  return SseFrame(Dump(body));
}

}  // namespace loom::openai
