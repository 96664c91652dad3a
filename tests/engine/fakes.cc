#include "tests/engine/fakes.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace loom::testing {
namespace {

// Length of the UTF-8 character that starts with lead byte c.
size_t Utf8Length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  return 4;
}

class FakeStream : public StreamDecoder {
 public:
  explicit FakeStream(const std::map<int32_t, std::string>* pieces) : pieces_(pieces) {}

  std::string Append(int32_t token_id) override {
    auto it = pieces_->find(token_id);
    pending_ += it != pieces_->end() ? it->second : absl::StrCat("<", token_id, ">");
    size_t complete = 0;
    while (complete < pending_.size()) {
      const size_t len = Utf8Length(static_cast<unsigned char>(pending_[complete]));
      if (complete + len > pending_.size()) break;
      complete += len;
    }
    std::string out = pending_.substr(0, complete);
    pending_.erase(0, complete);
    return out;
  }

  std::string Flush() override { return pending_.empty() ? "" : (pending_.clear(), "\uFFFD"); }

 private:
  const std::map<int32_t, std::string>* pieces_;
  std::string pending_;
};

// The first token the mask allows at or after `token`, counting around the
// mask; `token` itself when the mask allows nothing.
int32_t FirstAllowedFrom(const uint32_t* mask, int32_t words, int32_t token) {
  const int32_t n = words * 32;
  for (int32_t k = 0; k < n; ++k) {
    const int32_t t = ((token % n) + n + k) % n;
    if ((mask[t >> 5] >> (t & 31)) & 1u) return t;
  }
  return token;
}

}  // namespace

FakeExecutor::FakeExecutor(Options options, TokenScript script)
    : options_(options), script_(std::move(script)) {}

ExecutorGeometry FakeExecutor::Geometry() const {
  return {.num_blocks = options_.num_blocks,
          .block_size = options_.block_size,
          .max_model_len = options_.max_model_len,
          .device = "cpu",
          .dtype = "float32",
          .max_num_seqs = options_.max_num_seqs,
          .max_num_batched_tokens = options_.max_num_batched_tokens,
          .prompt_logprobs = options_.prompt_logprobs,
          .vocab_size = options_.vocab_size,
          .kv_layout = options_.kv_layout,
          .kv_pool = "fake executor: no KV pool",
          .weight_formats = ""};
}

void FakeExecutor::AddPromptLogprobs(const ScheduledSeq& seq, StepResult& result) {
  if (!options_.prompt_logprobs) ADD_FAILURE() << "prompt logprobs asked of an executor without";
  const int32_t end =
      std::min(seq.num_computed_tokens + seq.num_scheduled_tokens, seq.num_prompt_tokens - 1);
  PromptLogprobsChunk& chunk = result.prompt_logprobs.emplace_back();
  chunk.seq_id = seq.seq_id;
  chunk.first_position = seq.num_computed_tokens + 1;
  for (int32_t p = seq.num_computed_tokens; p < end; ++p) {
    PromptTokenLogprob& entry = chunk.entries.emplace_back();
    entry.token_id = seq.all_token_ids[p + 1];
    entry.logprob = -static_cast<float>(p + 1);
    entry.top.assign(seq.num_prompt_logprobs, TopLogprob{entry.token_id, entry.logprob});
  }
}

absl::StatusOr<StepResult> FakeExecutor::Execute(const StepPlan& plan) {
  int64_t step = 0;
  {
    std::unique_lock lock(mu_);
    step = ++num_steps_;
    if (step == pause_at_) {
      paused_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !paused_; });
    }
    if (step == fail_at_) return absl::InternalError("fake executor failure");
  }
  StepResult result;
  int32_t num_tokens = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& seq = plan.seqs[i];
    num_tokens += seq.num_scheduled_tokens;
    const int64_t end = int64_t{seq.num_computed_tokens} + seq.num_scheduled_tokens;
    if (end > static_cast<int64_t>(seq.all_token_ids.size()) ||
        static_cast<int64_t>(seq.block_table.size()) * options_.block_size < end) {
      ADD_FAILURE() << "seq " << seq.seq_id << " scheduled past its tokens or blocks";
    }
    for (int32_t block : seq.block_table) {
      if (block <= 0 || block >= options_.num_blocks) ADD_FAILURE() << "bad block id " << block;
    }
    if (seq.num_prompt_logprobs >= 0) AddPromptLogprobs(seq, result);
    if (!seq.sample) continue;
    const std::span<const int32_t> prompt = seq.all_token_ids.first(seq.num_prompt_tokens);
    const int32_t num_generated =
        static_cast<int32_t>(seq.all_token_ids.size()) - seq.num_prompt_tokens;
    int32_t token = script_ ? script_(prompt, num_generated)
                            : (prompt.empty() ? 0 : prompt.back()) + 1 + num_generated;
    if (const uint32_t* mask = plan.token_masks.RowOf(i)) {
      token = FirstAllowedFrom(mask, plan.token_masks.words_per_row, token);
      std::lock_guard lock(mu_);
      ++num_masked_samples_;
    }
    SampledToken& sampled = result.sampled.emplace_back();
    sampled.seq_id = seq.seq_id;
    sampled.token_id = token;
    sampled.logprob = -0.5f;
  }
  if (num_tokens != plan.num_scheduled_tokens) ADD_FAILURE() << "num_scheduled_tokens mismatch";
  return result;
}

void FakeExecutor::FailAtStep(int64_t step) {
  std::lock_guard lock(mu_);
  fail_at_ = step;
}

void FakeExecutor::PauseAtStep(int64_t step) {
  std::lock_guard lock(mu_);
  pause_at_ = step;
}

void FakeExecutor::WaitUntilPaused() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return paused_; });
}

void FakeExecutor::Release() {
  std::lock_guard lock(mu_);
  pause_at_ = -1;
  paused_ = false;
  cv_.notify_all();
}

int64_t FakeExecutor::num_masked_samples() const {
  std::lock_guard lock(mu_);
  return num_masked_samples_;
}

int64_t FakeExecutor::num_steps() const {
  std::lock_guard lock(mu_);
  return num_steps_;
}

FakeDetokenizer::FakeDetokenizer(std::map<int32_t, std::string> pieces)
    : pieces_(std::move(pieces)) {}

std::unique_ptr<StreamDecoder> FakeDetokenizer::NewStream() const {
  return std::make_unique<FakeStream>(&pieces_);
}

ManualClock::ManualClock(absl::Time start) : now_(start) {}

absl::Time ManualClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration d) {
  std::lock_guard lock(mu_);
  now_ += d;
}

void RecordingSink::Push(RequestOutput output) {
  std::lock_guard lock(mu_);
  if (finished_) ADD_FAILURE() << "output pushed after the final one";
  finished_ = output.finished;
  outputs_.push_back(std::move(output));
  cv_.notify_all();
}

bool RecordingSink::WaitFinished(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoSeconds(timeout), [&] { return finished_; });
}

bool RecordingSink::WaitForOutputs(size_t count, absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoSeconds(timeout),
                      [&] { return outputs_.size() >= count; });
}

std::vector<RequestOutput> RecordingSink::outputs() const {
  std::lock_guard lock(mu_);
  return outputs_;
}

RequestOutput RecordingSink::final_output() const {
  std::lock_guard lock(mu_);
  return outputs_.empty() ? RequestOutput{} : outputs_.back();
}

std::string RecordingSink::Text(uint32_t index) const {
  std::lock_guard lock(mu_);
  std::string text;
  for (const RequestOutput& output : outputs_) {
    for (const SampleDelta& delta : output.samples) {
      if (delta.index == index) text += delta.text;
    }
  }
  return text;
}

std::vector<int32_t> RecordingSink::Tokens(uint32_t index) const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> tokens;
  for (const RequestOutput& output : outputs_) {
    for (const SampleDelta& delta : output.samples) {
      if (delta.index == index)
        tokens.insert(tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
    }
  }
  return tokens;
}

}  // namespace loom::testing
