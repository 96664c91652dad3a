// Token-based stopping rules, checked after every sampled token: EOS,
// stop_token_ids, max_tokens and max_model_len. Stop strings need detokenized
// text and are matched by the engine, which then calls Scheduler::FinishSeq.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "types/request_params.h"

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

// The rules as bounds on a sample's length (prompt included), the form a
// scheduler keeps beside each sequence's tokens.
struct StopBounds {
  int32_t min_stop_len = 0;  // EOS and stop tokens count from here (prompt + min_tokens)
  int32_t max_len = 0;       // the sample ends here: min(prompt + max_tokens, max_model_len)
  bool ignore_eos = false;

  static StopBounds From(const StopRules& rules, int32_t num_prompt_tokens, int32_t max_model_len) {
    return StopBounds{
        .min_stop_len = num_prompt_tokens + rules.min_tokens,
        .max_len = static_cast<int32_t>(std::min<int64_t>(
            static_cast<int64_t>(num_prompt_tokens) + rules.max_tokens, max_model_len)),
        .ignore_eos = rules.ignore_eos};
  }
};

// Whether the last of token_ids ends the sample, and why; stop_reason gets
// the stop token id when one matched.
[[nodiscard]] inline FinishReason CheckStop(std::span<const int32_t> token_ids,
                                            const StopBounds& bounds,
                                            std::span<const int32_t> stop_token_ids,
                                            std::span<const int32_t> eos_token_ids,
                                            std::string* stop_reason) {
  const auto num_tokens = static_cast<int32_t>(token_ids.size());
  const int32_t last = token_ids.back();
  if (num_tokens >= bounds.min_stop_len) {
    if (!bounds.ignore_eos && std::ranges::find(eos_token_ids, last) != eos_token_ids.end()) {
      return FinishReason::kStop;
    }
    if (std::ranges::find(stop_token_ids, last) != stop_token_ids.end()) {
      *stop_reason = absl::StrCat(last);
      return FinishReason::kStop;
    }
  }
  return num_tokens >= bounds.max_len ? FinishReason::kLength : FinishReason::kNone;
}

// Whether a sample's last token certainly ends nothing, from what a scheduler
// keeps beside the tokens: the sample is below its length limit and no stop
// token can match (too early for them, or no stop ids and no EOS that
// counts). The common case, decided without the stop id list; otherwise
// CheckStop decides.
[[nodiscard]] inline bool CannotStop(int32_t num_tokens, int32_t last, StopBounds bounds,
                                     bool has_stop_token_ids,
                                     std::span<const int32_t> eos_token_ids) {
  return num_tokens < bounds.max_len &&
         (num_tokens < bounds.min_stop_len ||
          (!has_stop_token_ids &&
           (bounds.ignore_eos || std::ranges::find(eos_token_ids, last) == eos_token_ids.end())));
}

[[nodiscard]] inline FinishReason CheckStop(std::span<const int32_t> token_ids,
                                            int32_t num_prompt_tokens, const StopRules& rules,
                                            std::span<const int32_t> eos_token_ids,
                                            int32_t max_model_len, std::string* stop_reason) {
  return CheckStop(token_ids, StopBounds::From(rules, num_prompt_tokens, max_model_len),
                   rules.stop_token_ids, eos_token_ids, stop_reason);
}

}  // namespace loom
