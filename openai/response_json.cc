#include "openai/response_json.h"

#include <cmath>

namespace loom::openai {

void AccumulateUsage(const v1::Usage& usage, v1::Usage* total) {
  total->set_prompt_tokens(total->prompt_tokens() + usage.prompt_tokens());
  total->set_completion_tokens(total->completion_tokens() + usage.completion_tokens());
  total->set_cached_prompt_tokens(total->cached_prompt_tokens() + usage.cached_prompt_tokens());
}

nlohmann::json FinishReasonJson(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORTED:
      return "abort";
    default:
      return nullptr;
  }
}

nlohmann::json StopReasonJson(const std::string& stop_reason) {
  if (stop_reason.empty()) return nullptr;
  return stop_reason;
}

nlohmann::json UsageJson(const v1::Usage& usage) {
  const uint64_t total = uint64_t{usage.prompt_tokens()} + usage.completion_tokens();
  return {{"prompt_tokens", usage.prompt_tokens()},
          {"completion_tokens", usage.completion_tokens()},
          {"total_tokens", total},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens()}}}};
}

nlohmann::json Envelope(const ResponseContext& context, const char* object) {
  return {{"id", context.id},
          {"object", object},
          {"created", context.created},
          {"model", context.model}};
}

std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

double LogprobJson(float logprob) {
  constexpr double kFloor = -9999.0;
  if (std::isnan(logprob) || logprob < kFloor) return kFloor;
  return logprob;
}

}  // namespace loom::openai
