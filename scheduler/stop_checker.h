// Token-based stopping rules, checked after every sampled token: EOS,
// stop_token_ids, max_tokens and max_model_len. Stop strings need detokenized
// text and are matched by the engine, which then calls Scheduler::FinishSeq.
#ifndef LOOM_SCHEDULER_STOP_CHECKER_H_
#define LOOM_SCHEDULER_STOP_CHECKER_H_

#include <cstdint>
#include <span>
#include <string>

#include "scheduler/request_params.h"

namespace loom {

// Whether the sequence whose last token was just sampled must stop, and why.
// Before min_tokens output tokens neither EOS nor a stop token ends it; EOS
// does not end it with ignore_eos. A stop token (not EOS) sets *stop_reason to
// its id in decimal. A stop beats a length limit reached by the same token.
[[nodiscard]] FinishReason CheckStop(std::span<const int32_t> token_ids, int32_t num_prompt_tokens,
                                     const StoppingParams& stopping,
                                     std::span<const int32_t> eos_token_ids, int32_t max_model_len,
                                     std::string* stop_reason);

}  // namespace loom

#endif  // LOOM_SCHEDULER_STOP_CHECKER_H_
