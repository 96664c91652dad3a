// Plans built by hand for executor tests: sequences whose tokens, blocks and
// progress the test keeps itself, so that an executor can be driven without a
// scheduler (and two executors can be given the very same plans).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "types/sampling_params.h"
#include "types/step.h"

namespace loom::testing {

struct HandSeq {
  int64_t id = 0;
  std::vector<int32_t> tokens;
  int32_t num_prompt = 0;
  int32_t computed = 0;
  std::vector<int32_t> blocks;
  SamplingParams sampling;
};

// Schedules up to n tokens of each seq (all remaining when n = 0), sampling
// where a seq reaches its last token; blocks are handed out in order from
// next_block.
inline StepPlan PlanTokens(const std::vector<HandSeq*>& seqs, int32_t n, int32_t block_size,
                           int32_t& next_block) {
  StepPlan plan;
  for (HandSeq* s : seqs) {
    const int32_t remaining = static_cast<int32_t>(s->tokens.size()) - s->computed;
    const int32_t count = n == 0 ? remaining : std::min(n, remaining);
    while (static_cast<int32_t>(s->blocks.size()) * block_size < s->computed + count) {
      s->blocks.push_back(next_block++);
    }
    ScheduledSeq ss;
    ss.seq_id = s->id;
    ss.all_token_ids = s->tokens;
    ss.num_prompt_tokens = s->num_prompt;
    ss.num_computed_tokens = s->computed;
    ss.num_scheduled_tokens = count;
    ss.block_table = s->blocks;
    ss.sample = s->computed + count == static_cast<int32_t>(s->tokens.size());
    ss.sampling = &s->sampling;
    plan.seqs.push_back(ss);
    plan.num_scheduled_tokens += count;
  }
  return plan;
}

// Advances each seq past the plan's tokens and appends its sampled token.
inline void ApplyStep(const std::vector<HandSeq*>& seqs, const StepPlan& plan,
                      const StepResult& result) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->computed += plan.seqs[i].num_scheduled_tokens;
  }
  for (const SampledToken& t : result.sampled) {
    for (HandSeq* s : seqs) {
      if (s->id == t.seq_id) {
        s->tokens.push_back(t.token_id);
      }
    }
  }
}

}  // namespace loom::testing
