#include "scheduler/stop_checker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/check.h"

namespace loom {

FinishReason CheckStop(std::span<const int32_t> token_ids, int32_t num_prompt_tokens,
                       const StoppingParams& stopping, std::span<const int32_t> eos_token_ids,
                       int32_t max_model_len, std::string* stop_reason) {
  const auto num_tokens = static_cast<int32_t>(token_ids.size());
  const int32_t num_output_tokens = num_tokens - num_prompt_tokens;
  LOOM_SCHEDULER_CHECK(num_output_tokens > 0);
  const int32_t last = token_ids.back();
  if (num_output_tokens >= stopping.min_tokens) {
    if (!stopping.ignore_eos && std::ranges::find(eos_token_ids, last) != eos_token_ids.end()) {
      return FinishReason::kStop;
    }
    if (std::ranges::find(stopping.stop_token_ids, last) != stopping.stop_token_ids.end()) {
      *stop_reason = absl::StrCat(last);
      return FinishReason::kStop;
    }
  }
  if (num_output_tokens >= stopping.max_tokens || num_tokens >= max_model_len) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

}  // namespace loom
