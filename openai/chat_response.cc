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

}  // namespace

std::string RenderChatCompletion(const ResponseContext& context,
                                 const v1::GenerateResponse& response) {
  nlohmann::json body = Envelope(context, "chat.completion");
  nlohmann::json choices = nlohmann::json::array();
  for (const v1::Completion& completion : response.completions()) {
    choices.push_back({{"index", completion.index()},
                       {"message", {{"role", "assistant"}, {"content", completion.text()}}},
                       {"logprobs", LogprobsOrNull(context, completion.logprobs())},
                       {"finish_reason", FinishReasonJson(completion.finish_reason())},
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
                            bool first) {
  nlohmann::json body = Envelope(context, kChunkObject);
  nlohmann::json message = nlohmann::json::object();
  if (first) message["role"] = "assistant";
  if (first || !delta.text().empty()) message["content"] = delta.text();
  nlohmann::json choice = {{"index", delta.index()},
                           {"delta", std::move(message)},
                           {"logprobs", LogprobsOrNull(context, delta.logprobs())},
                           {"finish_reason", FinishReasonJson(delta.finish_reason())},
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
