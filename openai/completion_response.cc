#include "openai/completion_response.h"

#include <utility>

#include "openai/logprobs_json.h"
#include "openai/response_json.h"
#include "openai/sse.h"

namespace loom::openai {
namespace {

constexpr char kObject[] = "text_completion";

nlohmann::json ChoiceJson(const ResponseContext& context, uint32_t index, std::string text,
                          const Logprobs& logprobs, size_t text_offset) {
  nlohmann::json logprobs_json = nullptr;
  if (context.options.logprobs.has_value()) {
    logprobs_json = CompletionLogprobsJson(logprobs, context.token_text, text_offset);
  }
  return {{"index", index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs_json)}};
}

// Whether the response scored its whole prompt: prompt_tokens - 1 entries
// (the first token has none).
bool HasPromptScores(const v1::GenerateResponse& response) {
  return response.usage().prompt_tokens() > 0 &&
         static_cast<uint32_t>(response.prompt_logprobs_size()) + 1 ==
             response.usage().prompt_tokens();
}

// A whole choice. With echo and logprobs the prompt's tokens lead the
// logprobs when the engine scored them (the parser asks it to); vLLM's
// prompt_logprobs field when it was asked for.
nlohmann::json FullChoiceJson(const ResponseContext& context, uint32_t index,
                              const v1::GenerateResponse& response,
                              const v1::Completion& completion, const std::string& echo) {
  nlohmann::json choice =
      ChoiceJson(context, index, echo + completion.text(), completion.logprobs(), echo.size());
  if (context.options.echo && context.options.logprobs.has_value() && HasPromptScores(response)) {
    choice["logprobs"] =
        EchoedCompletionLogprobsJson(response.first_prompt_token_id(), response.prompt_logprobs(),
                                     completion.logprobs(), context.token_text);
  }
  if (context.options.prompt_logprobs.has_value()) {
    choice["prompt_logprobs"] = PromptLogprobsJson(response.prompt_logprobs(), context.token_text);
  }
  choice["finish_reason"] = FinishReasonJson(completion.finish_reason());
  choice["stop_reason"] = StopReasonJson(completion.stop_reason());
  return choice;
}

}  // namespace

std::string RenderCompletionResponse(const ResponseContext& context,
                                     std::span<const v1::GenerateResponse> responses,
                                     std::span<const std::string> echo_prompts) {
  nlohmann::json body = Envelope(context, kObject);
  nlohmann::json choices = nlohmann::json::array();
  v1::Usage usage;
  for (size_t p = 0; p < responses.size(); ++p) {
    const std::string echo =
        context.options.echo && p < echo_prompts.size() ? echo_prompts[p] : std::string();
    for (const v1::Completion& completion : responses[p].completions()) {
      const uint32_t index = static_cast<uint32_t>(p * context.options.n) + completion.index();
      choices.push_back(FullChoiceJson(context, index, responses[p], completion, echo));
    }
    AccumulateUsage(responses[p].usage(), &usage);
  }
  body["choices"] = std::move(choices);
  body["usage"] = UsageJson(usage);
  return Dump(body);
}

std::string RenderCompletionChunk(const ResponseContext& context,
                                  const v1::GenerateStreamResponse& delta, uint32_t prompt_index,
                                  size_t text_offset) {
  nlohmann::json body = Envelope(context, kObject);
  const uint32_t index = prompt_index * static_cast<uint32_t>(context.options.n) + delta.index();
  nlohmann::json choice = ChoiceJson(context, index, delta.text(), delta.logprobs(), text_offset);
  if (context.options.prompt_logprobs.has_value() && delta.prompt_logprobs_size() > 0) {
    choice["prompt_logprobs"] = PromptLogprobsJson(delta.prompt_logprobs(), context.token_text);
  }
  choice["finish_reason"] = FinishReasonJson(delta.finish_reason());
  choice["stop_reason"] = StopReasonJson(delta.stop_reason());
  body["choices"] = nlohmann::json::array({std::move(choice)});
  if (context.options.include_usage) body["usage"] = nullptr;
  return SseFrame(Dump(body));
}

std::string RenderCompletionUsageChunk(const ResponseContext& context, const v1::Usage& usage) {
  nlohmann::json body = Envelope(context, kObject);
  body["choices"] = nlohmann::json::array();
  body["usage"] = UsageJson(usage);
  return SseFrame(Dump(body));
}

}  // namespace loom::openai
