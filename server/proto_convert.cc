#include "server/proto_convert.h"

namespace loom {

void CopyUsage(const Usage& usage, v1::Usage& out) {
  out.set_prompt_tokens(usage.prompt_tokens);
  out.set_completion_tokens(usage.completion_tokens);
  out.set_cached_prompt_tokens(usage.cached_prompt_tokens);
  out.set_queue_seconds(usage.queue_seconds);
  out.set_time_to_first_token_seconds(usage.time_to_first_token_seconds);
  out.set_total_seconds(usage.total_seconds);
}

void AppendLogprobs(const std::vector<TokenLogprobs>& logprobs,
                    google::protobuf::RepeatedPtrField<v1::TokenLogprob>& out) {
  for (const TokenLogprobs& lp : logprobs) {
    v1::TokenLogprob* token = out.Add();
    token->set_token_id(lp.token_id);
    token->set_logprob(lp.logprob);
    token->set_rank(lp.rank);
    for (const TopLogprob& top : lp.top) {
      v1::TopLogprob* alt = token->add_top();
      alt->set_token_id(top.token_id);
      alt->set_logprob(top.logprob);
    }
  }
}

}  // namespace loom
