// Test doubles for the engine: an executor that produces scripted tokens, a
// detokenizer with fixed pieces per token id (UTF-8 characters may span
// tokens), a manual clock and a sink that records what it is pushed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/clock.h"
#include "engine/request_output.h"
#include "model/executor.h"
#include "types/detokenizer.h"

namespace loom::testing {

// The token a sequence gets, from its prompt and how many tokens it has
// generated so far. The default continues the prompt's last id: p+1, p+2, ...
// A constrained sample (a token mask in the plan) gets the first allowed token
// at or after the scripted one, counting around the mask.
using TokenScript = std::function<int32_t(std::span<const int32_t> prompt, int32_t num_generated)>;

class FakeExecutor : public Executor {
 public:
  struct Options {
    int32_t num_blocks = 64;  // including the null block
    int32_t block_size = 4;
    int32_t max_model_len = 128;
    int32_t max_num_seqs = 0;  // reported limits; 0: none
    int32_t max_num_batched_tokens = 0;
    // Scores prompt positions when asked: prompt token p gets logprob -p and
    // its alternatives are k copies of itself.
    bool prompt_logprobs = true;
    int32_t vocab_size = 0;  // reported in Geometry(); 0: unknown
    KvCacheLayout kv_layout = {};
  };

  explicit FakeExecutor(Options options, TokenScript script = {});

  ExecutorGeometry Geometry() const override;
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;

  // Execute() number `step` (1-based, counting warm-up) returns INTERNAL.
  void FailAtStep(int64_t step);
  // Execute() number `step` waits until Release(); WaitUntilPaused() returns
  // once it does. Lets a test act between two steps without sleeping.
  // Release() also cancels a pause not reached yet.
  void PauseAtStep(int64_t step);
  void WaitUntilPaused();
  void Release();
  // As a layer of a long step finishing would (Executor::progress()).
  void AdvanceProgress() { NoteProgress(); }

  int64_t num_steps() const;
  // Samples drawn under a token mask so far.
  int64_t num_masked_samples() const;

 private:
  void AddPromptLogprobs(const ScheduledSeq& seq, StepResult& result);

  const Options options_;
  const TokenScript script_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t num_steps_ = 0;
  int64_t num_masked_samples_ = 0;
  int64_t fail_at_ = -1;
  int64_t pause_at_ = -1;
  bool paused_ = false;
};

// Token id -> piece of bytes; unknown ids decode to "<id>". Bytes are released
// only as whole UTF-8 characters, like the model's incremental detokenizer.
class FakeDetokenizer : public Detokenizer {
 public:
  explicit FakeDetokenizer(std::map<int32_t, std::string> pieces = {});
  std::unique_ptr<StreamDecoder> NewStream() const override;

 private:
  std::map<int32_t, std::string> pieces_;
};

class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'000'000));
  absl::Time Now() const override;
  void Advance(absl::Duration d);

 private:
  mutable std::mutex mu_;
  absl::Time now_;
};

// Records every output; tests wait for the final one.
class RecordingSink : public OutputSink {
 public:
  void Push(RequestOutput output) override;

  // Waits (bounded, so a broken engine fails the test instead of hanging) for
  // the final output.
  bool WaitFinished(absl::Duration timeout = absl::Seconds(30));
  // Waits until at least `count` outputs have arrived.
  bool WaitForOutputs(size_t count, absl::Duration timeout = absl::Seconds(30));

  std::vector<RequestOutput> outputs() const;
  RequestOutput final_output() const;  // the last output; call after WaitFinished
  // Concatenated text and tokens of one sample over all outputs.
  std::string Text(uint32_t index) const;
  std::vector<int32_t> Tokens(uint32_t index) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RequestOutput> outputs_;
  bool finished_ = false;
};

}  // namespace loom::testing
