#include "server/proto_convert.h"

#include "server/status_mapping.h"

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

void AppendToResponse(const RequestOutput& output, v1::GenerateResponse& response) {
  // A one-token prompt has no scores, but its first token still leads echoed
  // logprobs.
  if (!output.prompt_logprobs.empty()) {
    AppendLogprobs(output.prompt_logprobs, *response.mutable_prompt_logprobs());
  }
  if (output.first_prompt_token_id != 0) {
    response.set_first_prompt_token_id(output.first_prompt_token_id);
  }
  for (const SampleDelta& delta : output.samples) {
    if (delta.index >= static_cast<uint32_t>(response.completions_size())) {
      continue;
    }
    v1::Completion& completion = *response.mutable_completions(static_cast<int>(delta.index));
    for (int32_t id : delta.token_ids) {
      completion.add_token_ids(id);
    }
    completion.mutable_text()->append(delta.text);
    AppendLogprobs(delta.logprobs, *completion.mutable_logprobs());
    if (delta.finish_reason != FinishReason::kNone) {
      completion.set_finish_reason(ToProtoFinishReason(delta.finish_reason));
      completion.set_stop_reason(delta.stop_reason);
    }
  }
}

}  // namespace loom
