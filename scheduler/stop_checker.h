// Token-based stopping rules, checked after every sampled token: EOS,
// stop_token_ids, max_tokens and max_model_len. Stop strings need detokenized
// text and are matched by the engine, which then calls Scheduler::FinishSeq.
#ifndef LOOM_SCHEDULER_STOP_CHECKER_H_
#define LOOM_SCHEDULER_STOP_CHECKER_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "scheduler/request_params.h"

namespace loom {

// The token-based part of StoppingParams, small enough to sit next to the
// tokens it is checked against. stop_token_ids views the request's list.
struct StopRules {
  int32_t max_tokens = 0;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::span<const int32_t> stop_token_ids;

  static StopRules From(const StoppingParams& stopping) {
    return StopRules{.max_tokens = stopping.max_tokens,
                     .min_tokens = stopping.min_tokens,
                     .ignore_eos = stopping.ignore_eos,
                     .stop_token_ids = stopping.stop_token_ids};
  }
};

// Whether the sequence whose last token was just sampled must stop, and why.
// Before min_tokens output tokens neither EOS nor a stop token ends it; EOS
// does not end it with ignore_eos. A stop token (not EOS) sets *stop_reason to
// its id in decimal. A stop beats a length limit reached by the same token.
[[nodiscard]] inline FinishReason CheckStop(std::span<const int32_t> token_ids,
                                            int32_t num_prompt_tokens, const StopRules& rules,
                                            std::span<const int32_t> eos_token_ids,
                                            int32_t max_model_len, std::string* stop_reason) {
  const auto num_tokens = static_cast<int32_t>(token_ids.size());
  const int32_t num_output_tokens = num_tokens - num_prompt_tokens;
  const int32_t last = token_ids.back();
  if (num_output_tokens >= rules.min_tokens) {
    if (!rules.ignore_eos && std::ranges::find(eos_token_ids, last) != eos_token_ids.end()) {
      return FinishReason::kStop;
    }
    if (std::ranges::find(rules.stop_token_ids, last) != rules.stop_token_ids.end()) {
      *stop_reason = absl::StrCat(last);
      return FinishReason::kStop;
    }
  }
  if (num_output_tokens >= rules.max_tokens || num_tokens >= max_model_len) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

}  // namespace loom

#endif  // LOOM_SCHEDULER_STOP_CHECKER_H_
